"""A client that leaves while hangard captures a workspace cancels the capture.

Each test fills a session's workspace with 200 MB of random bytes, so that
the capture is still running when the client closes its socket: it starts
the request on a raw socket, waits until the checkpoint store holds the
capture's temporary file, and closes. hangard must then store nothing
(no checkpoint, no temporary file), leave the session active on its
sandbox, and free the session's lease at once: the next suspend succeeds
without a 409.
"""

import json
import os
import socket
import tempfile

import pytest

from conftest import READER, WRITER, Server, wait_for

NOISE_MB = 200


@pytest.fixture(scope="module")
def capturer(workdir):
    """A server of this module's own: its checkpoint store holds only what these tests make."""
    s = Server(tempfile.mkdtemp(dir=workdir)).start()
    yield s
    s.stop()


def temporaries(server):
    """The checkpoint store's temporary files (a capture writing)."""
    d = os.path.join(server.state_dir, "checkpoints")
    if not os.path.isdir(d):
        return []
    return [n for n in os.listdir(d) if n.endswith(".tmp")]


def answered(server, route):
    """The statuses hangard logged for requests of route, in order."""
    return [l["status"] for l in server.log_lines() if l.get("msg") == "request" and l.get("route") == route]


@pytest.fixture
def session(capturer):
    """An active session whose workspace is still being captured when the client leaves."""
    s = capturer.ok("POST", "/v1/sessions", {}, status=201).json()
    ws = s["workspace"]
    out = capturer.ok("POST", f"/v1/sandboxes/{s['sandbox']}/exec",
                      {"command": f"mkdir -p {ws} && head -c {NOISE_MB}M /dev/urandom > {ws}/noise && "
                                  f"stat -c %s {ws}/noise"}).json()
    assert out["exit_code"] == 0 and out["stdout"] == f"{NOISE_MB << 20}\n", out
    yield s
    capturer.request("DELETE", f"/v1/sessions/{s['id']}")


def snapshots_under_way(server):
    """Local snapshots being copied (a root caller's fork goes by snapshot)."""
    d = os.path.join(server.state_dir, "local", "snapshots")
    return [n for n in os.listdir(d) if n.startswith(".new-")] if os.path.isdir(d) else []


def leave_during_capture(server, path, body, route, under_way=temporaries):
    """Starts POST path, closes the socket once the capture is under way
    (under_way says so), waits until hangard has ended the request, and
    returns its status."""
    assert temporaries(server) == []
    before = len(answered(server, route))
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {WRITER}\r\n"
                     f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
        wait_for("the capture under way", lambda: under_way(server), timeout=60)
    finally:
        sock.close()
    return wait_for("hangard ending the request", lambda: answered(server, route)[before:], timeout=120)[0]


def assert_nothing_kept(server, s):
    """Nothing stored, the session active on its sandbox, and its lease free."""
    sid = s["id"]
    assert temporaries(server) == []
    assert server.ok("GET", f"/v1/sessions/{sid}/checkpoints").json() == {"checkpoints": []}
    got = server.ok("GET", f"/v1/sessions/{sid}").json()
    assert got["state"] == "active" and got["sandbox"] == s["sandbox"] and not got["checkpoint"], got
    # hangard waits for no lease (HANGAR_SESSION_BUSY_WAIT_SECONDS is 0): a
    # lease still held would be 409 here.
    got = server.ok("POST", f"/v1/sessions/{sid}/suspend", {}).json()
    assert got["state"] == "parked" and got["sandbox"] == s["sandbox"] and got["checkpoint"], got
    cps = server.ok("GET", f"/v1/sessions/{sid}/checkpoints").json()["checkpoints"]
    assert [c["id"] for c in cps] == [got["checkpoint"]] and cps[0]["archive_bytes"] > NOISE_MB << 20, cps
    assert temporaries(server) == []


def test_suspend_whose_client_leaves_stores_nothing(capturer, session):
    status = leave_during_capture(capturer, f"/v1/sessions/{session['id']}/suspend", {"blob": "the conversation"},
                                  "/v1/sessions/{id}/suspend")
    assert_nothing_kept(capturer, session)
    # Cancelled because its client left, not a failure of the server.
    assert status == 499
    from test_api import parse_prometheus
    samples, _ = parse_prometheus(capturer.ok("GET", "/metrics", token=READER).body.decode())
    key = frozenset({"method": "POST", "route": "/v1/sessions/{id}/suspend", "status": "499"}.items())
    assert samples.get(("hangard_requests_total", key)) == 1, sorted(k for k in samples if "499" in str(k))


def test_checkpoint_whose_client_leaves_stores_nothing(capturer, session):
    status = leave_during_capture(capturer, f"/v1/sandboxes/{session['sandbox']}/checkpoints",
                                  {"session": session["id"], "workspace": session["workspace"]},
                                  "/v1/sandboxes/{id}/checkpoints")
    assert_nothing_kept(capturer, session)
    assert status == 499


def test_fork_whose_client_leaves_keeps_nothing(capturer, session):
    sessions = sorted(x["id"] for x in capturer.ok("GET", "/v1/sessions").json()["sessions"])
    sandboxes = capturer.ok("GET", "/v1/sandboxes").json()["sandboxes"]
    status = leave_during_capture(capturer, f"/v1/sessions/{session['id']}/fork", {"count": 2},
                                  "/v1/sessions/{id}/fork",
                                  snapshots_under_way if os.geteuid() == 0 else temporaries)
    assert status == 499
    # No session and no sandbox kept for the fork; then as for every capture.
    assert sorted(x["id"] for x in capturer.ok("GET", "/v1/sessions").json()["sessions"]) == sessions
    assert len(capturer.ok("GET", "/v1/sandboxes").json()["sandboxes"]) == len(sandboxes)
    assert_nothing_kept(capturer, session)


def test_exec_whose_client_leaves_stops_the_command(capturer, session):
    sb = session["sandbox"]
    route = "/v1/sandboxes/{id}/exec"
    before = len(answered(capturer, route))
    body = json.dumps({"command": "echo $$ > /tmp/leaver.pid; exec sleep 600"}).encode()
    sock = socket.create_connection(("127.0.0.1", capturer.port), timeout=30)
    try:
        sock.sendall(f"POST /v1/sandboxes/{sb}/exec HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {WRITER}\r\n"
                     f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)

        def started():
            r = capturer.ok("POST", f"/v1/sandboxes/{sb}/exec", {"command": "cat /tmp/leaver.pid 2>/dev/null"})
            return r.json()["stdout"].strip()
        pid = wait_for("the command to start", started, timeout=60)
    finally:
        sock.close()
    # The polls above are answered on the same route; the left request is the one 499.
    wait_for("hangard ending the request as left", lambda: 499 in answered(capturer, route)[before:], timeout=60)
    # The command was stopped in the sandbox, long before its 600 s.
    def gone():
        r = capturer.ok("POST", f"/v1/sandboxes/{sb}/exec", {"command": f"kill -0 {pid} 2>/dev/null && echo alive"})
        return r.json()["stdout"] == ""
    wait_for("the command to be stopped", gone, timeout=30)
