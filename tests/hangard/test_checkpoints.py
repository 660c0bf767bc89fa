"""Session forks and keep, and checkpoints, through hangard against real local sandboxes."""

import os

import pytest

from conftest import READER


def run(server, sandbox, command):
    out = server.ok("POST", f"/v1/sandboxes/{sandbox}/exec", {"command": command}).json()
    assert out["exit_code"] == 0, out
    return out["stdout"]


@pytest.fixture
def sessions(server):
    """Deletes the sessions a test names, forks included, whatever happens."""
    made = []
    yield made
    for sid in made:
        server.request("DELETE", f"/v1/sessions/{sid}")


def test_fork_then_keep_one(server, sessions):
    s = server.ok("POST", "/v1/sessions", {}, status=201).json()
    sid, ws = s["id"], s["workspace"]
    sessions.append(sid)
    run(server, s["sandbox"], f"mkdir -p {ws} && echo from-parent > {ws}/state.txt")
    before = len(server.ok("GET", f"/v1/sessions/{sid}/checkpoints").json()["checkpoints"])

    forks = server.ok("POST", f"/v1/sessions/{sid}/fork", {"count": 2}).json()["forks"]
    sessions.extend(f["session"]["id"] for f in forks if "session" in f)
    assert [f["index"] for f in forks] == [0, 1], forks
    assert all("error" not in f for f in forks), forks
    # The local provider does not fork a sandbox: a snapshot of its files for a root caller, else a checkpoint.
    by_snapshot = os.geteuid() == 0
    assert {f["method"] for f in forks} == {"snapshot" if by_snapshot else "checkpoint"}, forks
    kids = [f["session"] for f in forks]
    assert all(k["state"] == "active" and k["parent"] == sid for k in kids), kids
    assert kids[0]["fork_group"] and kids[0]["fork_group"] == kids[1]["fork_group"], kids
    sandboxes = {k["sandbox"] for k in kids}
    assert len(sandboxes) == 2 and s["sandbox"] not in sandboxes, kids
    for k in kids:
        # Each fork has the parent's files, in a sandbox of its own.
        assert run(server, k["sandbox"], f"cat {ws}/state.txt") == "from-parent\n"
    run(server, kids[0]["sandbox"], f"echo only-in-0 > {ws}/state.txt")
    assert run(server, kids[1]["sandbox"], f"cat {ws}/state.txt") == "from-parent\n"
    # A fork's checkpoint is kept under the parent's session id (a snapshot fork takes none).
    after = server.ok("GET", f"/v1/sessions/{sid}/checkpoints").json()["checkpoints"]
    assert len(after) == before + (0 if by_snapshot else 1) and all(c["session"] == sid for c in after), after

    # A reader can neither fork nor keep.
    assert server.request("POST", f"/v1/sessions/{sid}/fork", {}, token=READER).status == 403
    assert server.request("POST", f"/v1/sessions/{kids[0]['id']}/keep", token=READER).status == 403

    kept = server.ok("POST", f"/v1/sessions/{kids[0]['id']}/keep").json()
    assert kept["archived"] == 1 and kept["session"]["id"] == kids[0]["id"], kept
    assert kept["session"]["state"] == "active"
    assert server.ok("GET", f"/v1/sessions/{kids[1]['id']}").json()["state"] == "archived"
    assert server.ok("GET", f"/v1/sessions/{sid}").json()["state"] == "active"  # not in the group
    # Keeping again archives nothing more.
    assert server.ok("POST", f"/v1/sessions/{kids[0]['id']}/keep").json()["archived"] == 0
    # The parent is not a fork.
    r = server.request("POST", f"/v1/sessions/{sid}/keep")
    assert r.status == 400 and "not a fork" in r.json()["error"]["message"], r
    # An archived session does not fork.
    r = server.request("POST", f"/v1/sessions/{kids[1]['id']}/fork", {})
    assert r.status == 410 and r.json()["error"]["kind"] == "gone", r


@pytest.mark.parametrize("body", [{"count": 0}, {"count": 101}, {"count": "2"}, {"count": 1.5}, {"cuont": 2},
                                  b"{\"count\": 2", b"[2]"])
def test_fork_refuses_bad_bodies(server, body):
    r = server.request("POST", "/v1/sessions/no-such-session/fork", body,
                       headers={"Content-Type": "application/json"})
    assert r.status == 400 and r.json()["error"]["kind"] == "invalid", r


def test_fork_and_keep_of_unknown_sessions(server):
    for path in ("/v1/sessions/no-such-session/fork", "/v1/sessions/no-such-session/keep"):
        r = server.request("POST", path, {})
        assert r.status == 404 and r.json()["error"]["kind"] == "not_found", (path, r)
    r = server.request("POST", "/v1/sessions/no-such-session/keep", {"archive": "all"})
    assert r.status == 400, r


def test_session_checkpoints_info_and_delete(server, sessions):
    s = server.ok("POST", "/v1/sessions", {"labels": {"team": "a"}}, status=201).json()
    sid, ws = s["id"], s["workspace"]
    sessions.append(sid)
    assert server.ok("GET", f"/v1/sessions/{sid}/checkpoints", token=READER).json() == {"checkpoints": []}
    run(server, s["sandbox"], f"mkdir -p {ws} && echo one > {ws}/a.txt")
    first = server.ok("POST", f"/v1/sessions/{sid}/suspend", {"blob": "turn one", "no_park": True}).json()
    server.ok("POST", f"/v1/sessions/{sid}/resume")
    second = server.ok("POST", f"/v1/sessions/{sid}/suspend", {"blob": "turn two!", "no_park": True}).json()
    assert first["checkpoint"] and second["checkpoint"] and first["checkpoint"] != second["checkpoint"]

    listed = server.ok("GET", f"/v1/sessions/{sid}/checkpoints", token=READER).json()["checkpoints"]
    assert [c["id"] for c in listed] == [first["checkpoint"], second["checkpoint"]], listed
    got = server.ok("GET", f"/v1/checkpoints/{second['checkpoint']}", token=READER).json()
    assert got == listed[1]
    assert got["session"] == sid and got["workspace"] == ws and got["blob_bytes"] == len("turn two!")
    assert got["stored_bytes"] > 0 and got["archive_bytes"] > 0 and got["files"] >= 1
    assert got["content_hash"].startswith("blake2b-256:") and got["labels"]["team"] == "a"

    # A reader cannot delete; the latest of a session that can resume is kept.
    assert server.request("DELETE", f"/v1/checkpoints/{first['checkpoint']}", token=READER).status == 403
    r = server.request("DELETE", f"/v1/checkpoints/{second['checkpoint']}")
    assert r.status == 409 and r.json()["error"]["kind"] == "in_use" and sid in r.json()["error"]["message"], r
    assert server.ok("GET", f"/v1/checkpoints/{second['checkpoint']}")
    # An older one can go, and then it is gone.
    server.ok("DELETE", f"/v1/checkpoints/{first['checkpoint']}", status=204)
    r = server.request("GET", f"/v1/checkpoints/{first['checkpoint']}")
    assert r.status == 404 and r.json()["error"]["kind"] == "not_found", r
    assert server.request("DELETE", f"/v1/checkpoints/{first['checkpoint']}").status == 404
    listed = server.ok("GET", f"/v1/sessions/{sid}/checkpoints").json()["checkpoints"]
    assert [c["id"] for c in listed] == [second["checkpoint"]]
    # The session still resumes from the latest.
    back = server.ok("POST", f"/v1/sessions/{sid}/resume").json()
    assert back["last_resume"] == "cold" and run(server, back["sandbox"], f"cat {ws}/a.txt") == "one\n"
    # Once archived, its checkpoints are the caller's to delete.
    server.ok("POST", f"/v1/sessions/{sid}/archive")
    server.ok("DELETE", f"/v1/checkpoints/{second['checkpoint']}", status=204)
    assert server.ok("GET", f"/v1/sessions/{sid}/checkpoints").json() == {"checkpoints": []}


def test_checkpoint_ids_unknown_and_malformed(server):
    unknown = "ckpt-" + "a" * 26
    for method in ("GET", "DELETE"):
        r = server.request(method, f"/v1/checkpoints/{unknown}")
        assert r.status == 404 and r.json()["error"]["kind"] == "not_found", (method, r)
        for bad in ("..secret", "ckpt-%27%3B", "x" * 129):
            r = server.request(method, f"/v1/checkpoints/{bad}")
            assert r.status == 400 and r.json()["error"]["kind"] == "invalid", (method, bad, r)
    r = server.request("GET", "/v1/sessions/no-such-session/checkpoints")
    assert r.status == 404 and r.json()["error"]["kind"] == "not_found", r
    assert server.request("GET", f"/v1/checkpoints/{unknown}", token=None).status == 401


def test_checkpoint_of_a_sandbox(server, sandbox):
    run(server, sandbox, "mkdir -p /tmp/ws/sub && echo hello > /tmp/ws/sub/f.txt")
    assert server.request("POST", f"/v1/sandboxes/{sandbox}/checkpoints", {"workspace": "/tmp/ws"},
                          token=READER).status == 403
    cp = server.ok("POST", f"/v1/sandboxes/{sandbox}/checkpoints",
                   {"workspace": "/tmp/ws", "select": "all", "labels": {"k": "v"}, "blob": "notes"},
                   status=201).json()
    try:
        assert cp["id"].startswith("ckpt-") and cp["workspace"] == "/tmp/ws" and cp["selection"] == "all"
        assert cp["labels"] == {"k": "v"} and cp["blob_bytes"] == 5 and cp["files"] == 1 and cp["session"] == ""
        assert server.ok("GET", f"/v1/checkpoints/{cp['id']}").json() == cp
        child = server.ok("POST", f"/v1/sandboxes/{sandbox}/checkpoints",
                          {"workspace": "/tmp/ws", "parent": cp["id"]}, status=201).json()
        assert child["parent"] == cp["id"] and child["selection"] == "all"  # not a git repository
        server.ok("DELETE", f"/v1/checkpoints/{child['id']}", status=204)
    finally:
        server.ok("DELETE", f"/v1/checkpoints/{cp['id']}", status=204)


@pytest.mark.parametrize("body,status", [
    ({"workspace": "relative/path"}, 400),
    ({"select": "some"}, 400),
    ({"labels": ["a"]}, 400),
    ({"labels": {"bad key!": "v"}}, 400),
    ({"timeout": -1}, 400),
    ({"session": "no/slashes"}, 400),
    ({"wrkspace": "/tmp"}, 400),
    ({"workspace": "/no/such/dir"}, 404),
    ({"workspace": "/tmp", "parent": "ckpt-" + "b" * 26}, 404),
    (b"{\"workspace\":", 400),
])
def test_checkpoint_of_a_sandbox_refuses(server, sandbox, body, status):
    r = server.request("POST", f"/v1/sandboxes/{sandbox}/checkpoints", body,
                       headers={"Content-Type": "application/json"})
    assert r.status == status, (body, r)


def test_checkpoint_of_an_unknown_sandbox_is_gone(server):
    r = server.request("POST", "/v1/sandboxes/sb-0000000000000000/checkpoints", {})
    assert r.status == 410 and r.json()["error"]["kind"] == "gone", r


def test_checkpoint_over_the_cap_is_413_and_stores_nothing(make_server):
    s = make_server(env={"HANGAR_CHECKPOINT_MAX_BYTES": "65536"}).start()
    sb = s.ok("POST", "/v1/sandboxes", {}, status=201).json()["id"]
    try:
        run(s, sb, "mkdir -p /tmp/big && head -c 1048576 /dev/urandom > /tmp/big/noise")
        ses = s.ok("POST", "/v1/sessions", {"workspace": "/tmp/big"}, status=201).json()
        r = s.request("POST", f"/v1/sandboxes/{sb}/checkpoints",
                      {"workspace": "/tmp/big", "session": ses["id"]})
        assert r.status == 413 and r.json()["error"]["kind"] == "too_large", r
        assert "HANGAR_CHECKPOINT_MAX_BYTES" in r.json()["error"]["message"]
        assert s.ok("GET", f"/v1/sessions/{ses['id']}/checkpoints").json() == {"checkpoints": []}
        s.request("DELETE", f"/v1/sessions/{ses['id']}")
    finally:
        s.request("DELETE", f"/v1/sandboxes/{sb}")


def gauges(server):
    from test_api import parse_prometheus
    r = server.ok("GET", "/metrics", token=READER)
    samples, types = parse_prometheus(r.body.decode())
    for name in ("hangard_sessions", "hangard_parked_sandboxes", "hangard_checkpoints", "hangard_checkpoint_bytes",
                 "hangard_store_list_ok"):
        assert types[name] == "gauge", name
    assert samples[("hangard_store_list_ok", frozenset())] == 1

    def get(name, **labels):
        return samples.get((name, frozenset(labels.items())), 0)
    return get


def test_metrics_follow_parks_and_checkpoints(server, sessions, sandbox):
    before = gauges(server)
    s = server.ok("POST", "/v1/sessions", {}, status=201).json()
    sid, ws = s["id"], s["workspace"]
    sessions.append(sid)
    run(server, s["sandbox"], f"mkdir -p {ws} && head -c 100000 /dev/urandom > {ws}/noise")
    got = server.ok("POST", f"/v1/sessions/{sid}/suspend", {}).json()
    # The local provider hot-resumes: the suspend parks.
    assert got["state"] == "parked", got
    stored = server.ok("GET", f"/v1/checkpoints/{got['checkpoint']}").json()["stored_bytes"]
    assert stored > 100000
    after = gauges(server)
    assert after("hangard_parked_sandboxes", provider="local") == before("hangard_parked_sandboxes", provider="local") + 1
    assert after("hangard_sessions", state="parked") == before("hangard_sessions", state="parked") + 1
    assert after("hangard_checkpoints") == before("hangard_checkpoints") + 1
    assert after("hangard_checkpoint_bytes") == before("hangard_checkpoint_bytes") + stored

    # Woken: parked no more; the checkpoint stays.
    server.ok("POST", f"/v1/sessions/{sid}/resume")
    woken = gauges(server)
    assert woken("hangard_parked_sandboxes", provider="local") == before("hangard_parked_sandboxes", provider="local")
    assert woken("hangard_sessions", state="active") == before("hangard_sessions", state="active") + 1
    assert woken("hangard_checkpoint_bytes") == after("hangard_checkpoint_bytes")

    # A sandbox's checkpoint counts too, and its delete takes it off.
    run(server, sandbox, "mkdir -p /tmp/m && head -c 50000 /dev/urandom > /tmp/m/x")
    cp = server.ok("POST", f"/v1/sandboxes/{sandbox}/checkpoints", {"workspace": "/tmp/m"}, status=201).json()
    assert gauges(server)("hangard_checkpoint_bytes") == woken("hangard_checkpoint_bytes") + cp["stored_bytes"]
    server.ok("DELETE", f"/v1/checkpoints/{cp['id']}", status=204)
    assert gauges(server)("hangard_checkpoint_bytes") == woken("hangard_checkpoint_bytes")
