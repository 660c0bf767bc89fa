"""hangard's sandbox and session routes with the e2b provider against the e2b
fake: a fake control plane (E2B's cloud flavour, or CubeSandbox's CubeAPI)
whose sandboxes are real hangar-envd processes (SQLite store;
test_replicas.py runs it on PostgreSQL).

The fake's sandboxes share the host's filesystem, so a test can see what a
command did there, and run as another user: directories they write to are
made writable by anyone."""

import json
import os
import re
import shutil
import socket
import tempfile
import time

import pytest

from conftest import READER
from test_api import SSE, read_ndjson
from test_replicas import SECRET_KEY, exec_ok


class Events(SSE):
    """A /v1/events subscriber that keeps every event it reads, so one arriving
    before another asked for first is not lost, and whose waits end at a
    deadline whether heartbeats come or not."""

    def __init__(self, server):
        super().__init__(server)
        self.seen = []

    def events(self, want, timeout=60):
        """The data of the first event named want not taken yet."""
        end = time.monotonic() + timeout
        while True:
            while (m := re.search(rb"event: (\S+)\r?\ndata: (.*?)\r?\n", self.buf)):
                self.seen.append((m.group(1).decode(), json.loads(m.group(2))))
                self.buf = self.buf[m.end():]
            for i, (name, data) in enumerate(self.seen):
                if name == want:
                    del self.seen[i]
                    return data
            left = end - time.monotonic()
            if left <= 0:
                pytest.fail(f"no {want} event within {timeout} s; had {[n for n, _ in self.seen]}")
            self.sock.settimeout(left)
            try:
                self._more()
            except socket.timeout:
                pass


def on_fake(make_server, workdir, fake, state_dir=None, **env):
    """A hangard whose default provider is e2b on fake, started. Replicas
    share a state_dir, and checkpoints beside it."""
    if state_dir:
        ckpt = os.path.join(state_dir, "checkpoints")
        os.makedirs(ckpt, exist_ok=True)
    else:
        ckpt = tempfile.mkdtemp(dir=workdir, prefix="checkpoints-")
    e = {
        "HANGAR_SECRET_KEY": SECRET_KEY,
        "HANGAR_DEFAULT_PROVIDER": "e2b",
        "HANGAR_CHECKPOINT_STORE": "file://" + ckpt,
        **fake.env(),
        **env,
    }
    return make_server(env=e, state_dir=state_dir).start()


def shared_dir(prefix):
    """A directory of the host the fake's sandboxes may write to."""
    base = tempfile.mkdtemp(prefix=prefix)
    os.chmod(base, 0o1777)
    return base


@pytest.fixture
def cloud(make_fake, make_server, workdir):
    return on_fake(make_server, workdir, make_fake("cloud"))


@pytest.fixture(params=["cloud", "cube"])
def flavoured(request, make_fake, make_server, workdir):
    """(hangard, fake) on each flavour of the fake."""
    fake = make_fake(request.param)
    return on_fake(make_server, workdir, fake), fake


def test_sandbox_create_exec_files_delete_on_the_cloud_fake(cloud):
    base = shared_dir("hangard-e2b-files-")
    sb = cloud.ok("POST", "/v1/sandboxes", {"timeout": 600, "env": {"WHO": "cloud"}}, status=201).json()
    sid = sb["id"]
    assert sb["provider"] == "e2b" and sb["state"] == "running", sb
    try:
        assert exec_ok(cloud, sid, "echo $WHO") == "cloud\n"
        out = cloud.ok("POST", f"/v1/sandboxes/{sid}/exec", {"command": "echo oops >&2; exit 3"}).json()
        assert out["exit_code"] == 3 and out["stderr"] == "oops\n", out
        put = cloud.ok("PUT", f"/v1/sandboxes/{sid}/files?path={base}/in.txt", b"through the fake\n").json()
        assert put["bytes"] == 17, put
        assert cloud.ok("GET", f"/v1/sandboxes/{sid}/files?path={base}/in.txt").body == b"through the fake\n"
        assert cloud.ok("POST", f"/v1/sandboxes/{sid}/pause").json()["state"] == "paused"
        assert cloud.ok("POST", f"/v1/sandboxes/{sid}/resume").json()["state"] == "running"
        assert exec_ok(cloud, sid, f"cat {base}/in.txt") == "through the fake\n"
        assert sid in [x["id"] for x in cloud.ok("GET", "/v1/sandboxes?provider=e2b").json()["sandboxes"]]
    finally:
        cloud.ok("DELETE", f"/v1/sandboxes/{sid}", status=204)
        shutil.rmtree(base, ignore_errors=True)
    r = cloud.request("GET", f"/v1/sandboxes/{sid}")
    assert r.status in (404, 410), r


def test_session_park_wake_cold_resume_and_fork_on_the_cloud_fake(cloud):
    base = shared_dir("hangard-e2b-ws-")
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


def test_sandbox_fork_gives_working_sandboxes_on_the_cloud_fake(make_fake, make_server, workdir):
    fake = make_fake("cloud")
    s = on_fake(make_server, workdir, fake)
    sid = s.ok("POST", "/v1/sandboxes", {"timeout": 600}, status=201).json()["id"]
    kids = []
    try:
        forks = s.ok("POST", f"/v1/sandboxes/{sid}/fork", {"count": 2}).json()["forks"]
        assert sorted(f["index"] for f in forks) == [0, 1], forks
        assert all("error" not in f and f["provider"] == "e2b" for f in forks), forks
        kids = [f["id"] for f in forks]
        assert len(set(kids)) == 2 and sid not in kids, kids
        # Each is a sandbox of its own on the platform, with an envd that answers.
        live = fake.sandboxes()
        for k in kids:
            assert live[k]["state"] == "running" and live[k]["envd_pid"] != live[sid]["envd_pid"], live
            assert s.ok("GET", f"/v1/sandboxes/{k}").json()["state"] == "running"
            assert exec_ok(s, k, "echo $E2B_SANDBOX_ID") == k + "\n"
        listed = {x["id"] for x in s.ok("GET", "/v1/sandboxes").json()["sandboxes"]}
        assert {sid, *kids} <= listed, listed
    finally:
        for k in kids:
            s.request("DELETE", f"/v1/sandboxes/{k}")
        s.request("DELETE", f"/v1/sandboxes/{sid}")
    assert not {sid, *kids} & set(fake.sandboxes())


def test_sandbox_fork_is_unsupported_on_cube(make_fake, make_server, workdir):
    s = on_fake(make_server, workdir, make_fake("cube"))
    sid = s.ok("POST", "/v1/sandboxes", {"timeout": 600}, status=201).json()["id"]
    try:
        r = s.request("POST", f"/v1/sandboxes/{sid}/fork", {"count": 2})
        assert r.status == 501 and r.json()["error"]["kind"] == "unsupported", r
    finally:
        s.request("DELETE", f"/v1/sandboxes/{sid}")


def test_sandbox_snapshot_makes_a_template_a_create_can_use(flavoured):
    s, fake = flavoured
    sid = s.ok("POST", "/v1/sandboxes", {"timeout": 600}, status=201).json()["id"]
    made = []
    try:
        snap = s.ok("POST", f"/v1/sandboxes/{sid}/snapshot", {"name": "snappy"}, status=201).json()
        snap_id = snap["snapshot_id"]
        assert snap_id and snap_id != sid, snap
        # The snapshot's sandbox goes on; a create from the snapshot is a new one.
        assert s.ok("GET", f"/v1/sandboxes/{sid}").json()["state"] == "running"
        clone = s.ok("POST", "/v1/sandboxes", {"template": snap_id, "timeout": 600}, status=201).json()
        made.append(clone["id"])
        live = fake.sandboxes()
        # Made from the snapshot's template, not from the one its sandbox came from.
        assert clone["id"] != sid and clone["template"] == live[clone["id"]]["template_id"], (clone, live)
        assert clone["template"] != live[sid]["template_id"], (clone, live)
        assert exec_ok(s, clone["id"], "echo from-snapshot") == "from-snapshot\n"
    finally:
        for x in made + [sid]:
            s.request("DELETE", f"/v1/sandboxes/{x}")


def test_sandbox_timeout_moves_the_platforms_deadline(flavoured):
    s, fake = flavoured
    sid = s.ok("POST", "/v1/sandboxes", {"timeout": 600}, status=201).json()["id"]
    try:
        before = fake.sandboxes()[sid]["expires_at"]
        got = s.ok("POST", f"/v1/sandboxes/{sid}/timeout", {"seconds": 3600}).json()
        assert got["id"] == sid and got["state"] == "running", got
        after = fake.sandboxes()[sid]["expires_at"]
        # Set on the platform, not only in hangard's record: about an hour from now.
        assert before is not None and after is not None and after - before > 2400, (before, after)
        assert abs(got["expires_at_us"] / 1e6 - after) < 120, (got, after)
        r = s.request("POST", f"/v1/sandboxes/{sid}/timeout", {})
        assert r.status == 400, r
    finally:
        s.request("DELETE", f"/v1/sandboxes/{sid}")


def test_exec_stream_on_the_fakes(flavoured):
    s, _ = flavoured
    sid = s.ok("POST", "/v1/sandboxes", {"timeout": 600}, status=201).json()["id"]
    try:
        events = read_ndjson(s, f"/v1/sandboxes/{sid}/exec/stream",
                             {"command": "for i in 1 2 3; do echo line$i; done; echo oops >&2; exit 5"})
        assert "".join(e["data"] for e in events if e["type"] == "stdout") == "line1\nline2\nline3\n", events
        assert "".join(e["data"] for e in events if e["type"] == "stderr") == "oops\n", events
        assert events[-1]["type"] == "exit" and events[-1]["exit_code"] == 5, events
        assert [e["type"] for e in events].count("exit") == 1
    finally:
        s.request("DELETE", f"/v1/sandboxes/{sid}")


def test_templates_are_listed_on_the_fakes(flavoured):
    s, fake = flavoured
    templates = s.ok("GET", "/v1/templates", token=READER).json()["templates"]
    # The fakes start with E2B's default template, "base"; its status is the platform's word.
    got = [(t["name"], t["status"].lower(), t["provider"]) for t in templates]
    assert got == [("base", "ready", "e2b")], templates
    assert s.ok("GET", "/v1/templates?provider=e2b", token=READER).json()["templates"] == templates
    # It is the template a create that names none is made from.
    sid = s.ok("POST", "/v1/sandboxes", {"timeout": 600}, status=201).json()["id"]
    try:
        assert fake.sandboxes()[sid]["template_id"] == templates[0]["id"], templates
    finally:
        s.request("DELETE", f"/v1/sandboxes/{sid}")


def test_sandbox_checkpoint_on_the_fakes(flavoured):
    s, _ = flavoured
    base = shared_dir("hangard-e2b-ckpt-")
    ws = os.path.join(base, "ws")
    sid = s.ok("POST", "/v1/sandboxes", {"timeout": 600}, status=201).json()["id"]
    try:
        exec_ok(s, sid, f"mkdir -p {ws}/sub && printf 'in the fake' > {ws}/sub/f.txt")
        cp = s.ok("POST", f"/v1/sandboxes/{sid}/checkpoints",
                  {"workspace": ws, "labels": {"k": "v"}, "blob": "notes"}, status=201).json()
        assert cp["id"].startswith("ckpt-") and cp["workspace"] == ws and cp["files"] == 1, cp
        assert cp["labels"] == {"k": "v"} and cp["blob_bytes"] == 5 and cp["stored_bytes"] > 0, cp
        assert s.ok("GET", f"/v1/checkpoints/{cp['id']}", token=READER).json() == cp
        s.ok("DELETE", f"/v1/checkpoints/{cp['id']}", status=204)
        assert s.request("GET", f"/v1/checkpoints/{cp['id']}").status == 404
    finally:
        s.request("DELETE", f"/v1/sandboxes/{sid}")
        shutil.rmtree(base, ignore_errors=True)


def test_session_checkpoints_and_events_on_the_fakes(flavoured):
    s, fake = flavoured
    base = shared_dir("hangard-e2b-ws-")
    ws = os.path.join(base, "ws")
    sub = Events(s)
    sid = None
    try:
        made = s.ok("POST", "/v1/sessions", {"timeout": 600, "workspace": ws}, status=201).json()
        sid, first = made["id"], made["sandbox"]
        ev = sub.events("sandbox.created")
        assert ev["id"] == first and ev["provider"] == "e2b", ev
        ev = sub.events("session.created")
        assert ev["session"] == sid and ev["sandbox"] == first and ev["provider"] == "e2b", ev
        assert s.ok("GET", f"/v1/sessions/{sid}/checkpoints", token=READER).json() == {"checkpoints": []}

        exec_ok(s, first, f"mkdir -p {ws} && echo one > {ws}/a.txt")
        one = s.ok("POST", f"/v1/sessions/{sid}/suspend", {"blob": "turn one"}).json()
        assert one["state"] == "parked", one
        ev = sub.events("session.parked")
        assert ev["session"] == sid and ev["checkpoint"] == one["checkpoint"], ev
        assert fake.sandboxes()[first]["state"] == "paused"
        s.ok("POST", f"/v1/sessions/{sid}/resume")
        ev = sub.events("session.woken")
        assert ev["session"] == sid and ev["sandbox"] == first, ev
        assert fake.sandboxes()[first]["state"] == "running"

        two = s.ok("POST", f"/v1/sessions/{sid}/suspend", {"blob": "turn two!", "no_park": True}).json()
        assert two["state"] == "suspended", two
        ev = sub.events("session.suspended")
        assert ev["session"] == sid and ev["checkpoint"] == two["checkpoint"], ev
        assert sub.events("sandbox.killed")["id"] == first
        assert first not in fake.sandboxes()

        listed = s.ok("GET", f"/v1/sessions/{sid}/checkpoints", token=READER).json()["checkpoints"]
        assert [c["id"] for c in listed] == [one["checkpoint"], two["checkpoint"]], listed
        assert all(c["session"] == sid and c["workspace"] == ws for c in listed), listed
        assert [c["blob_bytes"] for c in listed] == [len("turn one"), len("turn two!")], listed
        assert listed[1]["parent"] == one["checkpoint"], listed
    finally:
        sub.close()
        if sid:
            s.request("DELETE", f"/v1/sessions/{sid}")
        shutil.rmtree(base, ignore_errors=True)
