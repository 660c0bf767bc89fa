"""The checkpoint worker is a program of its own, hangar-envd-archive.

The daemon runs in every sandbox for its whole life; libarchive and what it
pulls in are loaded only by the worker each checkpoint request starts. These
tests guard both halves: the daemon does not link libarchive, and a daemon
whose worker is missing still serves everything else and refuses the
checkpoint endpoints cleanly (404, as clients expect from a daemon without
them), instead of failing to start or crashing.
"""

import os
import shutil
import subprocess

from conftest import envd_binary, worker_binary
from test_process import run, sh, stdout_of


def needed(path):
    """The DT_NEEDED names of an ELF program, as readelf -d prints them."""
    out = subprocess.run(["readelf", "-dW", path], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


def test_the_daemon_does_not_link_libarchive():
    names = needed(envd_binary())
    assert names, "readelf found no NEEDED entries: is hangar-envd dynamically linked?"
    assert not [n for n in names if n.startswith(("libarchive", "libzstd"))], names


def test_the_worker_links_libarchive_and_sits_beside_the_daemon():
    assert os.access(worker_binary(), os.X_OK), worker_binary()
    assert [n for n in needed(worker_binary()) if n.startswith("libarchive")]


def test_a_daemon_without_its_worker_serves_commands_and_refuses_checkpoints(make_envd, tmp_path):
    alone = tmp_path / "bin"
    alone.mkdir()
    shutil.copy2(envd_binary(), alone / "hangar-envd")
    assert not (alone / "hangar-envd-archive").exists()
    d = make_envd(binary=str(alone / "hangar-envd"))
    assert "checkpoint worker" in d.output(), d.output()
    evs, err = run(d.client, sh("echo still here"))
    assert err is None and stdout_of(evs) == b"still here\n", (evs, err)
    (tmp_path / "ws").mkdir()
    query = f"?path={tmp_path / 'ws'}"
    for method, url in (("GET", "/hangar/v1/info"), ("GET", "/hangar/v1/archive" + query),
                        ("PUT", "/hangar/v1/archive" + query + "&mode=replace")):
        r = d.client.request(method, url, body=b"" if method == "PUT" else None,
                             headers={"Content-Type": "application/x-tar"} if method == "PUT" else None)
        assert r.status == 404, (method, url, r.status)
    assert d.alive()
