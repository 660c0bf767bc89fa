"""The reaper's thread: one replica at a time holds its lease, hands it over
on SIGTERM, and forgets sandboxes that expired. Two hangard processes on one
SQLite state directory stand for replicas here; tests/hangard/test_replicas.py
does the same on PostgreSQL (suite postgres)."""

import os
import signal
import tempfile

import pytest

from conftest import READER, wait_for


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


def replicas(make_server, n, interval="1", lease="30", env=None):
    state = tempfile.mkdtemp(dir=os.environ.get("TMPDIR", "/tmp"), prefix="hangard-reaper-")
    e = {"HANGARD_REAPER_INTERVAL_SECONDS": interval, "HANGARD_REAPER_LEASE_SECONDS": lease}
    e.update(env or {})
    return [make_server(state_dir=state, env=e).start() for _ in range(n)]


def test_one_replica_reaps_and_sigterm_hands_the_lease_over(make_server):
    a, b = replicas(make_server, 2)
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


def test_the_reaper_forgets_a_sandbox_that_expired(make_server):
    (s,) = replicas(make_server, 1)
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


def test_no_reaper_when_the_interval_is_0(make_server):
    (s,) = replicas(make_server, 1, interval="0")
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
