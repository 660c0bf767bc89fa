"""/v1/sessions against real local sandboxes: suspend, hot and cold resume, archive."""

from conftest import READER


def test_session_lifecycle(server):
    s = server.ok("POST", "/v1/sessions", {"labels": {"team": "a"}}, status=201).json()
    sid, first = s["id"], s["sandbox"]
    assert s["state"] == "active" and first and s["last_resume"] == "none" and s["labels"] == {"team": "a"}
    try:
        ws = s["workspace"]
        out = server.ok("POST", f"/v1/sandboxes/{first}/exec",
                        {"command": f"mkdir -p {ws} && echo kept > {ws}/note.txt && cat {ws}/note.txt"}).json()
        assert out["stdout"] == "kept\n", out
        assert sid in [x["id"] for x in server.ok("GET", "/v1/sessions", token=READER).json()["sessions"]]

        # A reader cannot suspend.
        assert server.request("POST", f"/v1/sessions/{sid}/suspend", {}, token=READER).status == 403

        got = server.ok("POST", f"/v1/sessions/{sid}/suspend", {"blob": "the conversation"}).json()
        assert got["state"] in ("parked", "suspended") and got["checkpoint"], got
        hot = got["state"] == "parked"
        got = server.ok("POST", f"/v1/sessions/{sid}/resume").json()
        assert got["state"] == "active" and got["sandbox"], got
        if hot:
            assert got["last_resume"] == "hot" and got["sandbox"] == first, got

        got = server.ok("POST", f"/v1/sessions/{sid}/suspend", {"no_park": True}).json()
        assert got["state"] == "suspended", got
        got = server.ok("POST", f"/v1/sessions/{sid}/resume").json()
        assert got["state"] == "active" and got["last_resume"] == "cold" and got["sandbox"] != first, got
        out = server.ok("POST", f"/v1/sandboxes/{got['sandbox']}/exec", {"command": f"cat {ws}/note.txt"}).json()
        assert out["stdout"] == "kept\n", out

        assert server.ok("POST", f"/v1/sessions/{sid}/archive").json()["state"] == "archived"
        r = server.request("POST", f"/v1/sessions/{sid}/resume")
        assert r.status == 410 and r.json()["error"]["kind"] == "gone", r
        r = server.request("POST", f"/v1/sessions/{sid}/suspend", {})
        assert r.status == 410, r
    finally:
        server.request("DELETE", f"/v1/sessions/{sid}")
    r = server.request("GET", f"/v1/sessions/{sid}")
    assert r.status == 404 and r.json()["error"]["kind"] == "not_found", r


def test_session_bad_requests(server):
    r = server.request("GET", "/v1/sessions/no-such-session")
    assert r.status == 404, r
    r = server.request("POST", "/v1/sessions/no-such-session/resume")
    assert r.status == 404, r
    r = server.request("POST", "/v1/sessions", {"no_such_field": 1})
    assert r.status == 400, r
    r = server.request("POST", "/v1/sessions", {"exclusive_credential": "yes"})
    assert r.status == 400, r
    r = server.request("POST", "/v1/sessions/no-such-session/suspend", {"no_park": 1})
    assert r.status == 400, r
    r = server.request("POST", "/v1/sessions", b"{not json", headers={"Content-Type": "application/json"})
    assert r.status == 400, r


def test_session_events_reach_subscribers(server):
    from test_api import SSE
    sub = SSE(server)
    sid = None
    try:
        s = server.ok("POST", "/v1/sessions", {}, status=201).json()
        sid, first = s["id"], s["sandbox"]
        ev = sub.events("session.created")
        assert ev["session"] == sid and ev["sandbox"] == first and ev["provider"] == "local", ev

        got = server.ok("POST", f"/v1/sessions/{sid}/suspend", {}).json()
        assert got["state"] == "parked", got
        ev = sub.events("session.parked")
        assert ev["session"] == sid and ev["sandbox"] == first and ev["checkpoint"] == got["checkpoint"], ev

        server.ok("POST", f"/v1/sessions/{sid}/resume")
        ev = sub.events("session.woken")
        assert ev["session"] == sid and ev["sandbox"] == first, ev

        got = server.ok("POST", f"/v1/sessions/{sid}/suspend", {"no_park": True}).json()
        ev = sub.events("session.suspended")
        assert ev["session"] == sid and ev["checkpoint"] == got["checkpoint"] and ev["reason"], ev

        got = server.ok("POST", f"/v1/sessions/{sid}/resume").json()
        ev = sub.events("session.restored")
        assert ev["session"] == sid and ev["sandbox"] == got["sandbox"] != first, ev

        forks = server.ok("POST", f"/v1/sessions/{sid}/fork", {"count": 1}).json()["forks"]
        kid = forks[0]["session"]
        ev = sub.events("session.forked")
        assert ev["session"] == kid["id"] and ev["sandbox"] == kid["sandbox"], ev
        server.ok("DELETE", f"/v1/sessions/{kid['id']}", status=204)
        assert sub.events("session.deleted")["session"] == kid["id"]

        server.ok("POST", f"/v1/sessions/{sid}/archive")
        assert sub.events("session.archived")["session"] == sid
        server.ok("DELETE", f"/v1/sessions/{sid}", status=204)
        assert sub.events("session.deleted")["session"] == sid
        sid = None
    finally:
        sub.close()
        if sid:
            server.request("DELETE", f"/v1/sessions/{sid}")


def _hold_lease(server, sid, holder, seconds):
    """Writes a lease on the session's row as another replica would (SQLite store)."""
    import sqlite3
    import time
    db = sqlite3.connect(f"{server.state_dir}/hangar.db", timeout=10)
    with db:
        db.execute("UPDATE sessions SET lease_holder = ?, lease_expires_us = ? WHERE id = ?",
                   (holder, int((time.time() + seconds) * 1e6), sid))
    db.close()


def test_busy_session_answers_409_at_once(server):
    s = server.ok("POST", "/v1/sessions", {}, status=201).json()
    sid = s["id"]
    try:
        # Another replica (not a process of this machine) holds the lease for a minute.
        _hold_lease(server, sid, "another-replica", 60)
        for method, path, body in (("POST", f"/v1/sessions/{sid}/suspend", {}),
                                   ("POST", f"/v1/sessions/{sid}/resume", None),
                                   ("POST", f"/v1/sessions/{sid}/archive", None)):
            r = server.request(method, path, body, timeout=20)
            assert r.status == 409, (path, r.status, r.body)
            err = r.json()["error"]
            assert err["kind"] == "busy", err
            assert 50 <= err["retry_after_s"] <= 60, err
            assert 50 <= int(r.header("Retry-After")) <= 60, r.headers
        # Given up: the session answers again.
        _hold_lease(server, sid, "", -1)
        assert server.ok("POST", f"/v1/sessions/{sid}/suspend", {}).json()["state"] in ("parked", "suspended")
    finally:
        server.request("DELETE", f"/v1/sessions/{sid}")
