"""The image store over hangard: list, inspect, pull (progress on /v1/events), remove."""

import io
import json
import os
import subprocess
import sys
import tarfile

import pytest

from conftest import ADMIN, READER
from test_api import SSE

HERE = os.path.dirname(os.path.abspath(__file__))


def rootfs_tar(path, text):
    """A one-file root filesystem, as a tarball."""
    with tarfile.open(path, "w") as t:
        data = text.encode()
        info = tarfile.TarInfo("etc/hangar-test")
        info.size = len(data)
        d = tarfile.TarInfo("etc")
        d.type = tarfile.DIRTYPE
        d.mode = 0o755
        t.addfile(d)
        t.addfile(info, io.BytesIO(data))


def cli_import(server, tar, name):
    cli = os.path.join(os.environ["HANGAR_BUILD_ROOT"], "programs", "hangar", "hangar")
    env = dict(server.env)
    r = subprocess.run([cli, "image", "import", tar, "--name", name], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_list_inspect_remove(server, workdir):
    tar = os.path.join(workdir, "root-a.tar")
    rootfs_tar(tar, "a")
    digest = cli_import(server, tar, "hangar-test/one:1")
    listed = server.ok("GET", "/v1/images", token=READER).json()["images"]
    mine = [i for i in listed if i["digest"] == digest]
    assert len(mine) == 1 and mine[0]["names"] == ["docker.io/hangar-test/one:1"], listed
    assert mine[0]["size_bytes"] >= 1 and len(mine[0]["layers"]) == 1 and mine[0]["in_use"] is False
    got = server.ok("GET", f"/v1/images/{digest}", token=READER).json()
    assert got == mine[0]
    # 12 hex digits are enough; a name no image has is 404, one that is no name 400.
    assert server.ok("GET", f"/v1/images/{digest[7:19]}", token=READER).json()["digest"] == digest
    assert server.request("GET", "/v1/images/abc", token=READER).status == 404
    assert server.request("GET", "/v1/images/Not%20A%20Name", token=READER).status == 400
    assert server.request("GET", "/v1/images/sha256:" + "0" * 64, token=READER).status == 404
    # A reader may not remove; a writer may.
    assert server.request("DELETE", f"/v1/images/{digest}", token=READER).status == 403
    assert server.request("DELETE", f"/v1/images/{digest}").status == 204
    assert server.request("GET", f"/v1/images/{digest}", token=READER).status == 404


def test_pull_reports_progress_as_events(server, workdir):
    sys.path.insert(0, os.path.join(HERE, "..", "registry"))
    import registry
    images = os.environ.get("HANGAR_TEST_IMAGES") or os.path.join(os.environ["HANGAR_BUILD_ROOT"], "test-images")
    try:
        subprocess.run(["sh", os.path.join(HERE, "..", "images", "make-images.sh"), images, "busybox"], check=True,
                       timeout=600, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"no test image to push: {e}")
    reg = registry.Registry(os.path.join(workdir, "registry"))
    try:
        registry.push(f"{images}/busybox", f"{reg.host}/img:latest")
        ev = SSE(server, token=ADMIN)
        try:
            r = server.request("POST", "/v1/images/pull", {"reference": f"{reg.host}/img"})
            assert r.status == 200, r
            img = r.json()
            assert f"{reg.host}/img:latest" in img["names"] and img["digest"].startswith("sha256:")
            seen = ev.events("image.pull")
            assert seen["reference"] == f"{reg.host}/img" and seen["phase"] in ("download", "unpack", "store")
            assert isinstance(seen["bytes_total"], int)
        finally:
            ev.close()
        # Bad requests, each a 400 naming the problem; a missing image 404.
        r = server.request("POST", "/v1/images/pull", {})
        assert r.status == 400 and "reference" in r.json()["error"]["message"]
        r = server.request("POST", "/v1/images/pull", {"reference": "Not A Reference"})
        assert r.status == 400
        r = server.request("POST", "/v1/images/pull", {"reference": f"{reg.host}/img", "extra": 1})
        assert r.status == 400
        r = server.request("POST", "/v1/images/pull", {"reference": f"{reg.host}/no-such-image"})
        assert r.status == 404, r
        assert server.request("POST", "/v1/images/pull", {"reference": f"{reg.host}/img"}, token=READER).status == 403
    finally:
        registry.stop_all()
