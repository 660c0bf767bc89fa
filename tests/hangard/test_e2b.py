"""hangard's sandbox and session routes with the e2b provider, cloud flavour,
against the e2b fake: a fake control plane whose sandboxes are real
hangar-envd processes (SQLite store; test_replicas.py runs it on PostgreSQL)."""

import os
import shutil
import tempfile

import pytest

from test_replicas import API_KEY, SECRET_KEY, exec_ok, fake_e2b  # noqa: F401 (a fixture)


@pytest.fixture
def cloud(make_server, fake_e2b, workdir):  # noqa: F811
    ckpt = tempfile.mkdtemp(dir=workdir, prefix="checkpoints-")
    return make_server(env={
        "HANGAR_SECRET_KEY": SECRET_KEY,
        "HANGAR_DEFAULT_PROVIDER": "e2b",
        "HANGAR_E2B_FLAVOR": "cloud",
        "HANGAR_E2B_API_URL": f"http://127.0.0.1:{fake_e2b['api']}",
        "HANGAR_E2B_SANDBOX_URL": f"http://127.0.0.1:{fake_e2b['edge']}",
        "HANGAR_E2B_API_KEY": API_KEY,
        "HANGAR_CHECKPOINT_STORE": "file://" + ckpt,
    }).start()


def test_sandbox_create_exec_files_delete_on_the_cloud_fake(cloud):
    sb = cloud.ok("POST", "/v1/sandboxes", {"timeout": 600, "env": {"WHO": "cloud"}}, status=201).json()
    sid = sb["id"]
    assert sb["provider"] == "e2b" and sb["state"] == "running", sb
    try:
        assert exec_ok(cloud, sid, "echo $WHO") == "cloud\n"
        out = cloud.ok("POST", f"/v1/sandboxes/{sid}/exec", {"command": "echo oops >&2; exit 3"}).json()
        assert out["exit_code"] == 3 and out["stderr"] == "oops\n", out
        put = cloud.ok("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/in.txt", b"through the fake\n").json()
        assert put["bytes"] == 17, put
        assert cloud.ok("GET", f"/v1/sandboxes/{sid}/files?path=/tmp/in.txt").body == b"through the fake\n"
        assert cloud.ok("POST", f"/v1/sandboxes/{sid}/pause").json()["state"] == "paused"
        assert cloud.ok("POST", f"/v1/sandboxes/{sid}/resume").json()["state"] == "running"
        assert exec_ok(cloud, sid, "cat /tmp/in.txt") == "through the fake\n"
        assert sid in [x["id"] for x in cloud.ok("GET", "/v1/sandboxes?provider=e2b").json()["sandboxes"]]
    finally:
        cloud.ok("DELETE", f"/v1/sandboxes/{sid}", status=204)
    r = cloud.request("GET", f"/v1/sandboxes/{sid}")
    assert r.status in (404, 410), r


def test_session_park_wake_cold_resume_and_fork_on_the_cloud_fake(cloud):
    # The fake's sandboxes share the host's filesystem and run as another
    # user: the workspace is in a directory anyone may write to.
    base = tempfile.mkdtemp(prefix="hangard-e2b-ws-")
    os.chmod(base, 0o1777)
    ws = os.path.join(base, "ws")
    s = cloud.ok("POST", "/v1/sessions", {"timeout": 600, "workspace": ws}, status=201).json()
    sid, first = s["id"], s["sandbox"]
    assert s["provider"] == "e2b", s
    try:
        exec_ok(cloud, first, f"mkdir -p {ws} && echo kept > {ws}/note.txt")
        got = cloud.ok("POST", f"/v1/sessions/{sid}/suspend", {"blob": "turn one"}).json()
        # cloud declares hot resume: parked, paused with its memory.
        assert got["state"] == "parked" and got["checkpoint"], got
        assert cloud.ok("GET", f"/v1/sandboxes/{first}").json()["state"] == "paused"
        got = cloud.ok("POST", f"/v1/sessions/{sid}/resume").json()
        assert got["state"] == "active" and got["last_resume"] == "hot" and got["sandbox"] == first, got

        got = cloud.ok("POST", f"/v1/sessions/{sid}/suspend", {"no_park": True}).json()
        assert got["state"] == "suspended" and got["sandbox"] == "", got
        shutil.rmtree(ws)  # the platform lost the old disk: only the checkpoint has the file
        got = cloud.ok("POST", f"/v1/sessions/{sid}/resume").json()
        assert got["last_resume"] == "cold" and got["sandbox"] not in ("", first), got
        assert exec_ok(cloud, got["sandbox"], f"cat {ws}/note.txt") == "kept\n"

        # The provider forks natively.
        forks = cloud.ok("POST", f"/v1/sessions/{sid}/fork", {"count": 2}).json()["forks"]
        assert all("error" not in f for f in forks), forks
        kids = [f["session"] for f in forks]
        assert {f["method"] for f in forks} <= {"native", "snapshot"}, forks
        for k in kids:
            assert k["parent"] == sid and k["provider"] == "e2b" and k["state"] == "active", k
            assert exec_ok(cloud, k["sandbox"], "echo forked") == "forked\n"
        kept = cloud.ok("POST", f"/v1/sessions/{kids[0]['id']}/keep").json()
        assert kept["archived"] == 1, kept
        for k in kids:
            cloud.ok("DELETE", f"/v1/sessions/{k['id']}", status=204)
    finally:
        cloud.request("DELETE", f"/v1/sessions/{sid}")
        shutil.rmtree(base, ignore_errors=True)
    assert cloud.request("GET", f"/v1/sessions/{sid}").status == 404
