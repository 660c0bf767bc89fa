"""The reaper's thread: one replica at a time holds its lease, hands it over
on SIGTERM, forgets sandboxes that expired, and unparks sessions parked for
longer, or in greater number, than hot resume allows. Two hangard processes
on one SQLite state directory stand for replicas here;
tests/hangard/test_replicas.py does the same on PostgreSQL (suite postgres)."""

import os
import shutil
import signal
import tempfile

import pytest

from conftest import READER, wait_for
from test_api import parse_prometheus
from test_e2b import Events, on_fake, shared_dir


def metric(server, name):
    """The value of an unlabelled sample of /metrics, or None."""
    r = server.request("GET", "/metrics", token=READER)
    assert r.status == 200, r
    for line in r.body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def leaders(*servers):
    return [metric(s, "hangard_reaper_leader") for s in servers]


def log_has(server, msg, pred=lambda line: True):
    return [l for l in server.log_lines() if l.get("msg") == msg and pred(l)]


def replicas(make_server, workdir, n, interval="1", lease="30", env=None):
    # Their state directory goes with the session's workdir.
    state = tempfile.mkdtemp(dir=workdir, prefix="hangard-reaper-")
    e = {"HANGARD_REAPER_INTERVAL_SECONDS": interval, "HANGARD_REAPER_LEASE_SECONDS": lease}
    e.update(env or {})
    return [make_server(state_dir=state, env=e).start() for _ in range(n)]


def test_one_replica_reaps_and_sigterm_hands_the_lease_over(make_server, workdir):
    a, b = replicas(make_server, workdir, 2)
    # Exactly one of them holds it, and keeps it over several passes.
    got = wait_for("a reaper leader", lambda: sorted(leaders(a, b)) == [0.0, 1.0] and leaders(a, b))
    holder, other = (a, b) if got[0] == 1.0 else (b, a)
    wait_for("a second pass", lambda: metric(holder, "hangard_reaper_passes_total") >= 2)
    assert leaders(a, b) == got
    assert metric(other, "hangard_reaper_passes_total") == 0
    assert log_has(holder, "reaper lease taken") and not log_has(other, "reaper lease taken")

    # SIGTERM: the holder gives the lease up, so the other takes it long
    # before the 30 s lease would have run out.
    assert holder.stop(signal.SIGTERM) == 0
    assert log_has(holder, "reaper lease released")
    wait_for("the other replica takes the lease", lambda: metric(other, "hangard_reaper_leader") == 1.0,
             timeout=15)
    assert log_has(other, "reaper lease taken")


def test_the_reaper_forgets_a_sandbox_that_expired(make_server, workdir):
    (s,) = replicas(make_server, workdir, 1)
    wait_for("the lease", lambda: metric(s, "hangard_reaper_leader") == 1.0)
    sid = s.ok("POST", "/v1/sandboxes", {"timeout": 1}, status=201).json()["id"]
    try:
        # Nothing lists sandboxes here: the record can only go through the reaper.
        got = wait_for("a reaper pass that forgot it",
                       lambda: log_has(s, "reaper pass", lambda l: l.get("records_forgotten", 0) >= 1), timeout=60)
        assert got[0]["lease"] == "reaper"
        assert metric(s, "hangard_reaper_failures_total") == 0
        assert s.request("GET", f"/v1/sandboxes/{sid}").status in (404, 410)
    finally:
        s.request("DELETE", f"/v1/sandboxes/{sid}")


def test_no_reaper_when_the_interval_is_0(make_server, workdir):
    (s,) = replicas(make_server, workdir, 1, interval="0")
    # A request round trip later than the start: a reaper would have had its first pass.
    assert s.request("GET", "/livez", token=None).status == 200
    assert metric(s, "hangard_reaper_leader") == 0
    assert metric(s, "hangard_reaper_passes_total") == 0
    assert s.stop() == 0
    assert not log_has(s, "reaper lease taken") and not log_has(s, "reaper lease released")


@pytest.mark.parametrize("interval,lease,complaint", [
    ("30", "30", "HANGARD_REAPER_LEASE_SECONDS (30) must be more than HANGARD_REAPER_INTERVAL_SECONDS (30)"),
    ("10", "1", "HANGARD_REAPER_LEASE_SECONDS"),
    ("-1", "90", "HANGARD_REAPER_INTERVAL_SECONDS"),
    ("soon", "90", "HANGARD_REAPER_INTERVAL_SECONDS"),
])
def test_a_bad_reaper_setting_stops_the_start(make_server, interval, lease, complaint):
    s = make_server(env={"HANGARD_REAPER_INTERVAL_SECONDS": interval, "HANGARD_REAPER_LEASE_SECONDS": lease})
    with pytest.raises(BaseException):
        s.start()
    assert s.proc.wait(timeout=30) != 0
    assert complaint in s.log_text()


def parked_reaped(server):
    r = server.request("GET", "/metrics", token=READER)
    assert r.status == 200, r
    samples, _ = parse_prometheus(r.body.decode())
    return samples[("hangard_reaper_reaped_total", frozenset({"what": "parked"}.items()))]


def test_the_reaper_unparks_a_session_parked_longer_than_hot_resume(make_server, workdir):
    # a parks (hot resume for a day) and never reaps; b reaps, and for b no
    # sandbox may stay parked (HANGAR_SESSION_HOT_RESUME_MINUTES=0): what a
    # parked one past its time looks like, without waiting a minute for it.
    (a,) = replicas(make_server, workdir, 1, interval="0")
    b = make_server(state_dir=a.state_dir, env={
        "HANGARD_REAPER_INTERVAL_SECONDS": "1", "HANGARD_REAPER_LEASE_SECONDS": "30",
        "HANGAR_SESSION_HOT_RESUME_MINUTES": "0"}).start()
    sub = Events(b)
    s = a.ok("POST", "/v1/sessions", {}, status=201).json()
    sid, sb, ws = s["id"], s["sandbox"], s["workspace"]
    try:
        wait_for("b's first pass", lambda: metric(b, "hangard_reaper_passes_total") >= 1)
        assert parked_reaped(b) == 0
        out = a.ok("POST", f"/v1/sandboxes/{sb}/exec", {"command": f"mkdir -p {ws} && echo kept > {ws}/n.txt"})
        assert out.json()["exit_code"] == 0, out
        got = a.ok("POST", f"/v1/sessions/{sid}/suspend", {}).json()
        assert got["state"] == "parked" and got["sandbox"] == sb, got

        wait_for("the reaper to unpark it", lambda: parked_reaped(b) == 1, timeout=60)
        ev = sub.events("session.unparked")
        assert ev["session"] == sid and "HANGAR_SESSION_HOT_RESUME_MINUTES" in ev["reason"], ev
        assert sub.events("sandbox.killed")["id"] == sb
        assert log_has(b, "reaper pass", lambda l: l.get("sessions_reaped") == 1)
        assert metric(b, "hangard_reaper_failures_total") == 0
        assert metric(a, "hangard_reaper_passes_total") == 0
        # The sandbox is gone, the session suspended on its checkpoint.
        r = a.request("GET", f"/v1/sandboxes/{sb}")
        assert r.status in (404, 410), r
        assert sb not in [x["id"] for x in a.ok("GET", "/v1/sandboxes").json()["sandboxes"]]
        now = a.ok("GET", f"/v1/sessions/{sid}").json()
        assert now["state"] == "suspended" and now["sandbox"] == "" and now["checkpoint"] == got["checkpoint"], now
        back = a.ok("POST", f"/v1/sessions/{sid}/resume").json()
        assert back["last_resume"] == "cold" and back["sandbox"] not in ("", sb), back
        out = a.ok("POST", f"/v1/sandboxes/{back['sandbox']}/exec", {"command": f"cat {ws}/n.txt"}).json()
        assert out["stdout"] == "kept\n", out
        assert parked_reaped(b) == 1
    finally:
        sub.close()
        a.request("DELETE", f"/v1/sessions/{sid}")


def test_the_reaper_unparks_the_longest_parked_over_the_cap(make_server, make_fake, workdir):
    # On the e2b fake: a parks two sessions (up to 2); b allows one, so its
    # reaper takes the sandbox parked first off the platform, and only that.
    fake = make_fake("cloud")
    state = tempfile.mkdtemp(dir=workdir, prefix="hangard-reaper-")
    a = on_fake(make_server, workdir, fake, state_dir=state, HANGARD_REAPER_INTERVAL_SECONDS="0",
                HANGAR_SESSION_HOT_RESUME_MAX="2")
    base = shared_dir("hangard-reaper-ws-")
    sessions = []
    try:
        for i in range(2):
            ws = os.path.join(base, f"ws{i}")
            s = a.ok("POST", "/v1/sessions", {"timeout": 600, "workspace": ws}, status=201).json()
            sessions.append(s)
            out = a.ok("POST", f"/v1/sandboxes/{s['sandbox']}/exec", {"command": f"mkdir -p {ws}"}).json()
            assert out["exit_code"] == 0, out
        for s in sessions:
            got = a.ok("POST", f"/v1/sessions/{s['id']}/suspend", {}).json()
            assert got["state"] == "parked", got
        live = fake.sandboxes()
        assert all(live[s["sandbox"]]["state"] == "paused" for s in sessions), live
        b = on_fake(make_server, workdir, fake, state_dir=state, HANGARD_REAPER_INTERVAL_SECONDS="1",
                    HANGARD_REAPER_LEASE_SECONDS="30", HANGAR_SESSION_HOT_RESUME_MAX="1")
        wait_for("the reaper to unpark one", lambda: parked_reaped(b) == 1, timeout=60)
        first, second = sessions
        # The pass that counted it had killed its sandbox on the platform.
        assert first["sandbox"] not in fake.sandboxes()
        assert a.ok("GET", f"/v1/sessions/{first['id']}").json()["state"] == "suspended"
        assert a.ok("GET", f"/v1/sessions/{second['id']}").json()["state"] == "parked"
        assert fake.sandboxes()[second["sandbox"]]["state"] == "paused"
        # One over the cap is all it takes: later passes leave the second parked.
        passes = metric(b, "hangard_reaper_passes_total")
        wait_for("another pass", lambda: metric(b, "hangard_reaper_passes_total") > passes)
        assert parked_reaped(b) == 1
        assert a.ok("GET", f"/v1/sessions/{second['id']}").json()["state"] == "parked"
    finally:
        for s in sessions:
            a.request("DELETE", f"/v1/sessions/{s['id']}")
        shutil.rmtree(base, ignore_errors=True)
