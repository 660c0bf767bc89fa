"""Fixtures for the local-image suite: an image store made for the session,
real local sandboxes on its images, as root.

The Debian root filesystem is built once (images.py) and reused; every
session stores it, and the small layers the tests make on top of it, into
an image store of its own with mkimage.py, digests computed from the bytes.
"""

import io
import os
import shutil
import tarfile
import tempfile

import pytest

for _name in [n for n in os.environ if n.startswith("HANGAR_")]:
    if _name not in ("HANGAR_ENVD_PATH", "HANGAR_JAIL_PATH", "HANGAR_TEST_IMAGES") \
            and not _name.startswith("HANGAR_PY_") and _name not in ("HANGAR_SOURCE_ROOT", "HANGAR_BUILD_ROOT"):
        del os.environ[_name]
_STATE = tempfile.TemporaryDirectory(prefix="hangar-img-")
os.environ["HANGAR_STATE_DIR"] = os.path.join(_STATE.name, "state")
os.environ["HANGAR_IMAGE_DIR"] = os.path.join(_STATE.name, "images")

import hangar  # noqa: E402

from images import BUSYBOX, DEBIAN, PATH, busybox_tar, debian_tar, mkimage as store_image  # noqa: E402

LAYERED = "hangar-test/layered:1"
HOSTILE = "hangar-test/hostile:1"
TARGET = os.path.join(_STATE.name, "outside")


def layer_tar(path, members):
    """A layer tar at path: members are (name, kind, extra, uid) with kind file/dir/link/whiteout/opaque."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, extra, uid in members:
            if kind == "whiteout":
                d, b = os.path.split(name)
                name, kind, extra = os.path.join(d, ".wh." + b), "file", b""
            elif kind == "opaque":
                name, kind, extra = os.path.join(name, ".wh..wh..opq"), "file", b""
            ti = tarfile.TarInfo(name)
            ti.uid = ti.gid = uid
            ti.mtime = 1700000000
            if kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                t.addfile(ti)
            elif kind == "link":
                ti.type, ti.linkname = tarfile.SYMTYPE, extra
                t.addfile(ti)
            else:
                ti.mode, ti.size = 0o644, len(extra)
                t.addfile(ti, io.BytesIO(extra))


def mkimage(name, config, *tars):
    return store_image(os.environ["HANGAR_IMAGE_DIR"], name, config, *tars)


@pytest.fixture(scope="session")
def images():
    if os.geteuid() != 0:
        pytest.skip("image sandboxes need a root caller")
    base = debian_tar()
    layered = os.path.join(_STATE.name, "layered.tar")
    layer_tar(layered, [
        ("etc", "dir", None, 0),
        ("etc/issue", "whiteout", None, 0),
        ("usr", "dir", None, 0), ("usr/share", "dir", None, 0), ("usr/share/doc", "dir", None, 0),
        ("usr/share/doc", "opaque", None, 0),
        ("usr/share/doc/only-this", "file", b"kept\n", 0),
        ("srv", "dir", None, 0),
        ("srv/users-file", "file", b"mine\n", 1000),
    ])
    hostile = os.path.join(_STATE.name, "hostile.tar")
    layer_tar(hostile, [
        ("etc", "dir", None, 0),
        ("etc/passwd", "link", "../../../../../../../../.." + TARGET + "-passwd", 0),
        ("etc/hosts", "link", "/proc/self/root" + TARGET + "-hosts", 0),
        ("etc/hostname", "link", TARGET + "-hostname", 0),
        ("workspace", "link", "/etc", 0),
        ("run", "dir", None, 0),
        ("run/hangar", "link", "/etc", 0),
    ])
    path = PATH
    out = {
        "debian": mkimage(DEBIAN, {"Env": [path, "FROM_IMAGE=image", "BOTH=image"], "WorkingDir": "/srv/app"}, base),
        "layered": mkimage(LAYERED, {"Env": [path], "User": "1"}, base, layered),
        "hostile": mkimage(HOSTILE, {"Env": [path]}, base, hostile),
        "busybox": mkimage(BUSYBOX, {"Env": ["PATH=/bin"]}, busybox_tar()),
    }
    return out


@pytest.fixture(scope="session")
def ctx(images):
    c = hangar.Context({"HANGAR_DEFAULT_PROVIDER": "local", "HANGAR_LOCAL_NETWORK": "off"})
    yield c


def make(ctx, template, **kw):
    return hangar.Sandbox.create(ctx, provider="local", template=template, timeout=300, **kw)


def remove_runtime_dirs(top):
    """Removes the runtime directories (on a tmpfs) that the state directories under top link to as local/run."""
    for root, dirs, _ in os.walk(top):
        if os.path.basename(root) == "local" and "run" in dirs and os.path.islink(os.path.join(root, "run")):
            shutil.rmtree(os.readlink(os.path.join(root, "run")), ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    remove_runtime_dirs(_STATE.name)
