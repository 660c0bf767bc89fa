"""The image store from Python: import with progress, list, inspect, remove,
gc, and the errors each raises as its HangarError subclass."""

import gzip
import io
import os
import tarfile

import pytest

import hangar


def rootfs(path, files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mode = 0o644
            t.addfile(ti, io.BytesIO(data))
    with open(path, "wb") as f:
        f.write(gzip.compress(buf.getvalue(), mtime=0))


@pytest.fixture
def image_ctx(tmp_path):
    store = tmp_path / "images"
    store.mkdir(mode=0o700)
    return hangar.Context(settings={"HANGAR_STATE_DIR": str(tmp_path / "state"), "HANGAR_IMAGE_DIR": str(store)})


def test_import_list_inspect_remove(image_ctx, tmp_path):
    path = tmp_path / "root.tar.gz"
    rootfs(path, {"etc/os-release": b"ID=py\n", "big": os.urandom(3 << 20)})
    seen = []
    digest = image_ctx.import_image(str(path), name="py:1", progress=lambda p: seen.append(p) and False)
    assert digest.startswith("sha256:") and len(digest) == 71
    assert seen and all(isinstance(p, hangar.ImageProgress) for p in seen)
    assert seen[-1].phase == "store" and seen[-1].layers_done == seen[-1].layers_total == 1
    assert seen[-1].bytes_done == seen[-1].bytes_total == os.path.getsize(path)
    info = image_ctx.image("py:1")
    assert isinstance(info, hangar.ImageInfo)
    assert info.digest == digest and info.names == ["docker.io/library/py:1"]
    assert info.size_bytes == (3 << 20) + len(b"ID=py\n") and not info.in_use
    assert [i.digest for i in image_ctx.images()] == [digest]
    assert image_ctx.image(digest[7:19]).digest == digest
    image_ctx.remove_image("py:1")
    assert list(image_ctx.images()) == []
    with pytest.raises(hangar.NotFoundError, match="py:1"):
        image_ctx.image("py:1")
    assert image_ctx.gc_images() == 0


def test_errors_are_their_classes(image_ctx, tmp_path):
    path = tmp_path / "root.tar.gz"
    rootfs(path, {"a": b"a"})
    with pytest.raises(hangar.InvalidArgumentError, match="name is required"):
        image_ctx.import_image(str(path))
    with pytest.raises(hangar.NotFoundError):
        image_ctx.import_image(str(tmp_path / "missing.tar"), name="x")
    with pytest.raises(hangar.CanceledError):
        image_ctx.import_image(str(path), name="x", progress=lambda p: True)
    assert list(image_ctx.images()) == []
    with pytest.raises(hangar.RefusedError, match=r"\"\.\./x\""):
        bad = tmp_path / "bad.tar"
        with tarfile.open(bad, "w") as t:
            ti = tarfile.TarInfo("../x")
            ti.size = 1
            t.addfile(ti, io.BytesIO(b"x"))
        image_ctx.import_image(str(bad), name="bad")
