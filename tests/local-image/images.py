#!/usr/bin/env python3
"""The Debian root filesystem the image tests run on, built once.

  images.py debian IMAGE_DIR   stores it in IMAGE_DIR as hangar-test/debian:12
                               and prints its digest, then its one layer's root
  images.py debian-tar         prints the path of its root filesystem tarball

The root is made with mmdebstrap (minbase, bookworm, plus the packages
below) into the image cache, HANGAR_TEST_IMAGES, else test-images/ in the
build tree (HANGAR_BUILD_ROOT), under a name that changes with the list, and
reused from there.
"""
import hashlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEBIAN = "hangar-test/debian:12"
# hangar-envd brings its own libraries (none of them is in a minbase root:
# the image does not carry them). python3, procps and iproute2 are what the
# local-isolation probes run.
PACKAGES = "python3,procps,iproute2"
BUSYBOX = "hangar-test/busybox:1"
PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def tool_env():
    """The environment for the tools that build images: without the sanitizer runtime the
    tests may run under (LD_PRELOAD), which some of them (gpg in mmdebstrap) hang on."""
    return {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}


def image_cache():
    d = os.environ.get("HANGAR_TEST_IMAGES") or os.path.join(os.environ["HANGAR_BUILD_ROOT"], "test-images")
    os.makedirs(d, exist_ok=True)
    return d


def debian_tar():
    tag = hashlib.sha256(PACKAGES.encode()).hexdigest()[:12]
    path = os.path.join(image_cache(), "debian-12-minbase-%s.tar" % tag)
    if not os.path.exists(path):
        tmp = path + ".tmp.%d" % os.getpid()
        subprocess.run(["mmdebstrap", "--quiet", "--format=tar", "--variant=minbase", "--include=" + PACKAGES,
                        "bookworm", tmp],
                       check=True, stdin=subprocess.DEVNULL, env=tool_env())
        os.rename(tmp, path)
    return path


def busybox_tar():
    """A root of the host's static busybox alone: no libc, no bash, busybox's own timeout."""
    import tarfile
    path = os.path.join(image_cache(), "busybox-root.tar")
    if os.path.exists(path):
        return path
    tmp = path + ".tmp.%d" % os.getpid()
    applets = subprocess.run(["/bin/busybox", "--list"], check=True, capture_output=True, text=True,
                             env=tool_env()).stdout.split()
    with tarfile.open(tmp, "w") as t:
        for d in ("bin", "etc", "tmp", "root", "home", "workspace"):
            i = tarfile.TarInfo(d)
            i.type, i.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            t.addfile(i)
        t.add("/bin/busybox", arcname="bin/busybox")
        for a in applets:
            if a != "busybox":
                i = tarfile.TarInfo("bin/" + a)
                i.type, i.linkname = tarfile.SYMTYPE, "busybox"
                t.addfile(i)
        import io
        for name, text in (("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"), ("etc/group", "root:x:0:\n")):
            data = text.encode()
            i = tarfile.TarInfo(name)
            i.size = len(data)
            t.addfile(i, io.BytesIO(data))
    os.rename(tmp, path)
    return path


def mkimage(store, name, config, *tars):
    r = subprocess.run([sys.executable, os.path.join(HERE, "mkimage.py"), store, name, json.dumps(config), *tars],
                       check=True, stdout=subprocess.PIPE, env=tool_env())
    return r.stdout.decode().strip()


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "debian-tar":
        print(debian_tar())
        sys.exit(0)
    if len(sys.argv) != 3 or sys.argv[1] != "debian":
        sys.exit(__doc__)
    digest = mkimage(sys.argv[2], DEBIAN, {"Env": [PATH]}, debian_tar())
    with open(os.path.join(sys.argv[2], "images", digest[7:] + ".json")) as f:
        layer = json.load(f)["layers"][0][7:]
    print(digest)
    print(os.path.join(sys.argv[2], "layers", layer, "root"))
