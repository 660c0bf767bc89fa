"""Images made by the tests themselves: tar layers, OCI layouts, docker-save
archives and root-filesystem tarballs, hostile ones included.

A layer is described as a list of members:
  ("dir", name, mode[, uid, gid])       ("file", name, data, mode[, uid, gid])
  ("symlink", name, target)             ("hardlink", name, target)
  ("chr", name, major, minor)           ("fifo", name)
"""

import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile

MTIME = 1700000000


def tar_bytes(members, fmt=tarfile.PAX_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for m in members:
            kind, name = m[0], m[1]
            ti = tarfile.TarInfo(name)
            ti.mtime = MTIME
            data = None
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
                ti.mode = m[2]
                if len(m) > 3:
                    ti.uid, ti.gid = m[3], m[4]
            elif kind == "file":
                data = m[2]
                ti.size = len(data)
                ti.mode = m[3]
                if len(m) > 4:
                    ti.uid, ti.gid = m[4], m[5]
            elif kind == "symlink":
                ti.type = tarfile.SYMTYPE
                ti.linkname = m[2]
                ti.mode = 0o777
            elif kind == "hardlink":
                ti.type = tarfile.LNKTYPE
                ti.linkname = m[2]
                ti.mode = 0o644
            elif kind == "chr":
                ti.type = tarfile.CHRTYPE
                ti.devmajor, ti.devminor = m[2], m[3]
                ti.mode = 0o666
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
                ti.mode = 0o644
            else:
                raise ValueError(kind)
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def compress(raw, how):
    if how == "gzip":
        return gzip.compress(raw, mtime=0)
    if how == "zstd":
        return subprocess.run(["zstd", "-q", "-c"], input=raw, capture_output=True, check=True).stdout
    return raw


LAYER_TYPES = {
    None: "application/vnd.oci.image.layer.v1.tar",
    "gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
    "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
}


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def config_for(raw_layers, config=None, arch="amd64"):
    return {
        "architecture": arch,
        "os": "linux",
        "config": config or {},
        "rootfs": {"type": "layers", "diff_ids": [sha256(r) for r in raw_layers]},
    }


def write_blob(root, data):
    d = sha256(data)
    os.makedirs(os.path.join(root, "blobs", "sha256"), exist_ok=True)
    with open(os.path.join(root, "blobs", "sha256", d[7:]), "wb") as f:
        f.write(data)
    return d


def oci_layout(root, layers, config=None, name=None, media_types=None, config_json=None, manifest_text=None,
               diff_ids=None):
    """layers: [(raw_tar, compression)]; returns the manifest's digest.

    media_types, config_json, manifest_text and diff_ids override what is
    written, to make a layout lie about its content.
    """
    os.makedirs(root, exist_ok=True)
    raws = [raw for raw, _ in layers]
    cfg = config_for(raws, config)
    if diff_ids is not None:
        cfg["rootfs"]["diff_ids"] = diff_ids
    cfg_bytes = config_json if config_json is not None else json.dumps(cfg).encode()
    cfg_digest = write_blob(root, cfg_bytes)
    descs = []
    for i, (raw, how) in enumerate(layers):
        blob = compress(raw, how)
        descs.append({"mediaType": (media_types or {}).get(i, LAYER_TYPES[how]), "digest": write_blob(root, blob),
                      "size": len(blob)})
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfg_digest,
                   "size": len(cfg_bytes)},
        "layers": descs,
    }
    m_bytes = manifest_text if manifest_text is not None else json.dumps(manifest).encode()
    m_digest = write_blob(root, m_bytes)
    entry = {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": m_digest, "size": len(m_bytes),
             "platform": {"os": "linux", "architecture": "amd64"}}
    if name:
        entry["annotations"] = {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": "latest"}
    with open(os.path.join(root, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [entry]}, f)
    with open(os.path.join(root, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    return m_digest, descs, cfg_digest


def docker_archive(path, raw_layers, repo_tags, config=None, compression=None):
    """A `docker save` archive of one image with uncompressed (or compressed) layer.tar files."""
    cfg = json.dumps(config_for(raw_layers, config)).encode()
    cfg_name = sha256(cfg)[7:] + ".json"
    members = [(cfg_name, cfg)]
    layer_paths = []
    for raw in raw_layers:
        d = hashlib.sha256(raw).hexdigest()
        layer_paths.append(f"{d}/layer.tar")
        members.append((f"{d}/layer.tar", compress(raw, compression)))
        members.append((f"{d}/VERSION", b"1.0"))
    manifest = [{"Config": cfg_name, "RepoTags": repo_tags, "Layers": layer_paths}]
    members.append(("manifest.json", json.dumps(manifest).encode()))
    with tarfile.open(path, "w") as t:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = MTIME
            ti.mode = 0o644
            t.addfile(ti, io.BytesIO(data))


def busybox_members():
    with open("/bin/busybox", "rb") as f:
        bb = f.read()
    return [
        ("dir", "bin", 0o755),
        ("file", "bin/busybox", bb, 0o755),
        ("symlink", "bin/sh", "busybox"),
        ("dir", "etc", 0o755),
        ("file", "etc/os-release", b"ID=busybox\n", 0o644),
    ]
