#!/usr/bin/env python3
"""Stores an image in an image store directory, in the store's on-disk format
(hangar-images(7)), from root-filesystem tars, for the local-image tests.

  mkimage.py IMAGE_DIR NAME CONFIG_JSON LAYER.tar...   (bottom layer first)

Each tar is one layer: its diff_id is the sha256 of the tar as given; it is
unpacked (as root: owners, modes, set-id bits and xattrs as the tar says)
into IMAGE_DIR/layers/<hex>/root with OCI whiteouts turned into overlayfs's
(".wh.NAME" -> a 0:0 character device NAME, ".wh..wh..opq" -> the opaque
xattrs on its directory), then layer.json is written, last and atomically.
The config and an OCI manifest naming the layers (uncompressed) are stored
as blobs; the image record, named by the manifest's digest, comes last.
Prints the manifest digest.
"""
import hashlib
import json
import os
import subprocess
import sys
import time


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
            h.update(chunk)
    return h.hexdigest()


def write_atomic(path, data, mode=0o644):
    tmp = '%s.tmp.%d' % (path, os.getpid())
    with open(tmp, 'wb') as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.rename(tmp, path)


def blob(store, data):
    hexd = hashlib.sha256(data).hexdigest()
    path = os.path.join(store, 'blobs', 'sha256', hexd)
    if not os.path.exists(path):
        write_atomic(path, data, 0o444)
    return 'sha256:' + hexd


def overlay_whiteouts(root):
    """OCI whiteouts in root, as overlayfs's."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + dirnames:
            if not name.startswith('.wh.'):
                continue
            path = os.path.join(dirpath, name)
            os.remove(path) if not os.path.isdir(path) or os.path.islink(path) else os.rmdir(path)
            if name == '.wh..wh..opq':
                for ns in ('trusted', 'user'):
                    os.setxattr(dirpath, ns + '.overlay.opaque', b'y', follow_symlinks=False)
            else:
                os.mknod(os.path.join(dirpath, name[4:]), 0o600 | 0o020000, os.makedev(0, 0))


def store_layer(store, tar):
    hexd = sha256_file(tar)
    size = os.path.getsize(tar)
    layer = os.path.join(store, 'layers', hexd)
    if os.path.exists(os.path.join(layer, 'layer.json')):
        return hexd, size
    root = os.path.join(layer, 'root')
    subprocess.run(['rm', '-rf', layer], check=True)
    os.makedirs(root)
    subprocess.run(['tar', '-x', '--numeric-owner', '--same-owner', '--same-permissions', '--xattrs',
                    '--xattrs-include=*', '-f', tar, '-C', root], check=True)
    overlay_whiteouts(root)
    files = sum(len(f) + len(d) for _, d, f in os.walk(root))
    write_atomic(os.path.join(layer, 'layer.json'),
                 json.dumps({'diff_id': 'sha256:' + hexd, 'size': size, 'files': files}).encode())
    return hexd, size


def normalise(name):
    """A reference as the store records it: docker.io/ and library/ by default, :latest without a tag."""
    first, _, rest = name.partition("/")
    if not rest or ("." not in first and ":" not in first and first != "localhost"):
        name = "docker.io/" + (name if rest else "library/" + name)
    last = name.rsplit("/", 1)[1]
    if ":" not in last and "@" not in last:
        name += ":latest"
    return name


def main():
    store, name, config, tars = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4:]
    name = normalise(name)
    for d in ('', 'blobs/sha256', 'layers', 'images', 'use', 'tmp'):
        os.makedirs(os.path.join(store, d), mode=0o700, exist_ok=True)
    os.chmod(store, 0o700)
    layers = [store_layer(store, t) for t in tars]
    cfg = json.dumps({'architecture': 'amd64', 'os': 'linux', 'config': config,
                      'rootfs': {'type': 'layers', 'diff_ids': ['sha256:' + h for h, _ in layers]}}).encode()
    cfg_digest = blob(store, cfg)
    manifest = json.dumps({
        'schemaVersion': 2, 'mediaType': 'application/vnd.oci.image.manifest.v1+json',
        'config': {'mediaType': 'application/vnd.oci.image.config.v1+json', 'digest': cfg_digest, 'size': len(cfg)},
        'layers': [{'mediaType': 'application/vnd.oci.image.layer.v1.tar', 'digest': 'sha256:' + h, 'size': s}
                   for h, s in layers]}).encode()
    digest = blob(store, manifest)
    hexd = digest[7:]
    # One name names one image: take it off any other record first.
    for rec in os.listdir(os.path.join(store, 'images')):
        path = os.path.join(store, 'images', rec)
        if not rec.endswith('.json') or rec == hexd + '.json':
            continue
        with open(path) as f:
            other = json.load(f)
        if name in other.get('names', []):
            other['names'].remove(name)
            write_atomic(path, json.dumps(other).encode(), 0o600)
    record = {'digest': digest, 'config_digest': cfg_digest, 'names': [name], 'os': 'linux',
              'architecture': 'amd64', 'layers': ['sha256:' + h for h, _ in layers],
              'size': sum(s for _, s in layers), 'created_us': int(time.time() * 1e6), 'config': config}
    write_atomic(os.path.join(store, 'images', hexd + '.json'), json.dumps(record).encode(), 0o600)
    print(digest)


if __name__ == '__main__':
    main()
