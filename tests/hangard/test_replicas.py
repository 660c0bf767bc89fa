"""Two hangard replicas on one PostgreSQL database (suite postgres).

tests/store/pg-run.sh starts the server in a temporary directory on a unix
socket and names it in HANGAR_TEST_PG_*; the sandboxes come from the e2b
fake (a fake control plane whose sandboxes are real hangar-envd processes),
as a deployment of several replicas would use a platform, not local jails.
Each replica has a state directory of its own: whatever one knows of
another's sandboxes and sessions comes through the database.
"""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import READER, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fakes"))
from fakee2b import FakeE2B, FakeE2BMissing  # noqa: E402

API_KEY = "e2b_test_0123456789abcdef0123456789abcdef"
SECRET_KEY = "replica test key: long and random enough 9xQ"


def pg_url():
    need = ("HANGAR_TEST_PG_USER", "HANGAR_TEST_PG_PASSWORD", "HANGAR_TEST_PG_HOST", "HANGAR_TEST_PG_PORT")
    if not all(os.environ.get(n) for n in need):
        pytest.skip("no PostgreSQL server (run through pg-run.sh: meson test --suite postgres)")
    return "postgresql://{}:{}@/postgres?host={}&port={}".format(*(os.environ[n] for n in need))


@pytest.fixture
def fake_e2b(workdir):
    with open(os.path.join(workdir, f"fake-e2b-{os.getpid()}-{time.monotonic_ns()}.log"), "wb") as log:
        try:
            fake = FakeE2B("cloud", api_key=API_KEY, log=log)
        except FakeE2BMissing:
            pytest.skip("FAKE_E2B and HANGAR_ENVD_PATH are not set (run through meson test)")
        with fake:
            yield {"api": fake.api_port, "edge": fake.edge_port}


@pytest.fixture
def replicas(make_server, fake_e2b, workdir):
    """make(n): n replicas on the database, each with its own state directory."""
    url = pg_url()
    ckpt = tempfile.mkdtemp(dir=workdir, prefix="checkpoints-")
    env = {
        "HANGAR_STORE": url,
        "HANGAR_SECRET_KEY": SECRET_KEY,
        "HANGAR_DEFAULT_PROVIDER": "e2b",
        "HANGAR_E2B_FLAVOR": "cloud",
        "HANGAR_E2B_API_URL": f"http://127.0.0.1:{fake_e2b['api']}",
        "HANGAR_E2B_SANDBOX_URL": f"http://127.0.0.1:{fake_e2b['edge']}",
        "HANGAR_E2B_API_KEY": API_KEY,
        "HANGAR_CHECKPOINT_STORE": "file://" + ckpt,
        "HANGARD_REAPER_INTERVAL_SECONDS": "1",
        "HANGARD_REAPER_LEASE_SECONDS": "3",
    }

    def make(n, **extra):
        e = dict(env, **extra)
        return [make_server(env=e).start() for _ in range(n)]

    return make


def metric(server, name):
    r = server.request("GET", "/metrics", token=READER)
    assert r.status == 200, r
    for line in r.body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def exec_ok(server, sid, command):
    out = server.ok("POST", f"/v1/sandboxes/{sid}/exec", {"command": command}).json()
    assert out["exit_code"] == 0, out
    return out["stdout"]


def test_a_sandbox_made_on_one_replica_is_served_by_the_other(replicas):
    a, b = replicas(2)
    sid = a.ok("POST", "/v1/sandboxes", {"timeout": 600}, status=201).json()["id"]
    got = b.ok("GET", f"/v1/sandboxes/{sid}").json()
    assert got["id"] == sid and got["provider"] == "e2b", got
    assert sid in [x["id"] for x in b.ok("GET", "/v1/sandboxes").json()["sandboxes"]]
    # b reaches its envd with the token a sealed into the database.
    assert exec_ok(b, sid, "echo served-by-b") == "served-by-b\n"
    assert exec_ok(a, sid, "echo served-by-a") == "served-by-a\n"

    b.ok("DELETE", f"/v1/sandboxes/{sid}", status=204)
    r = a.request("GET", f"/v1/sandboxes/{sid}")
    assert r.status in (404, 410), r
    r = a.request("POST", f"/v1/sandboxes/{sid}/exec", {"command": "true"})
    assert r.status in (404, 410), r


@pytest.mark.parametrize("no_park", [True, False], ids=["cold", "hot"])
def test_concurrent_resumes_through_both_replicas_give_one_sandbox(replicas, no_park):
    a, b = replicas(2)
    # The fake's sandboxes run as another user: they make the workspace in a
    # directory anyone may write to.
    base = tempfile.mkdtemp(prefix="hangard-replica-ws-")
    os.chmod(base, 0o1777)
    ws = os.path.join(base, "ws")
    s = a.ok("POST", "/v1/sessions", {"provider": "e2b", "workspace": ws, "timeout": 600}, status=201).json()
    sid = s["id"]
    try:
        exec_ok(a, s["sandbox"], f"mkdir -p {ws} && echo kept > {ws}/note.txt")
        got = a.ok("POST", f"/v1/sessions/{sid}/suspend", {"no_park": no_park}).json()
        assert got["state"] == ("suspended" if no_park else "parked"), got
        if no_park:
            # The platform lost the old sandbox's disk: only the checkpoint has the file.
            subprocess.run(["rm", "-rf", ws], check=True)
        assert b.ok("GET", f"/v1/sessions/{sid}").json()["state"] == got["state"]

        results = [None, None]
        barrier = threading.Barrier(2)

        def resume(i, server):
            barrier.wait(timeout=30)
            results[i] = server.request("POST", f"/v1/sessions/{sid}/resume")

        threads = [threading.Thread(target=resume, args=(i, srv)) for i, srv in enumerate((a, b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        # One wins the lease; the other is told at once that the session is
        # busy (409, Retry-After), or finds it active if it came second.
        assert all(r is not None and r.status in (200, 409) for r in results), results
        assert any(r.status == 200 for r in results), results
        for i, r in enumerate(results):
            if r.status == 409:
                assert r.json()["error"]["kind"] == "busy" and int(r.header("Retry-After")) >= 1, r
                # Retried once the winner is done: the same session, active.
                results[i] = (a, b)[i].ok("POST", f"/v1/sessions/{sid}/resume")
        sandboxes = {r.json()["sandbox"] for r in results}
        assert len(sandboxes) == 1, results
        (sb,) = sandboxes
        for srv in (a, b):
            now = srv.ok("GET", f"/v1/sessions/{sid}").json()
            assert now["state"] == "active" and now["sandbox"] == sb, now
        # Exactly one sandbox on the platform: no loser's sandbox left behind.
        listed = [x["id"] for x in b.ok("GET", "/v1/sandboxes").json()["sandboxes"]]
        assert listed == [sb], listed
        if not no_park:
            assert sb == s["sandbox"]
        assert exec_ok(b, sb, f"cat {ws}/note.txt") == "kept\n"
    finally:
        a.request("DELETE", f"/v1/sessions/{sid}")
        subprocess.run(["rm", "-rf", base], check=False)


def test_killing_the_reaper_moves_the_lease_to_the_other_replica(replicas):
    a, b = replicas(2)
    got = wait_for("one reaper leader",
                   lambda: sorted(x := [metric(a, "hangard_reaper_leader"), metric(b, "hangard_reaper_leader")])
                   == [0.0, 1.0] and x)
    holder, other = (a, b) if got[0] == 1.0 else (b, a)
    holder.stop(signal.SIGKILL)
    # Nobody gives it up: the other replica takes it once it runs out (3 s).
    wait_for("the other replica takes the lease", lambda: metric(other, "hangard_reaper_leader") == 1.0,
             timeout=60)
    assert not any(l.get("msg") == "reaper lease released" for l in holder.log_lines())
    assert any(l.get("msg") == "reaper lease taken" for l in other.log_lines())
    passes = metric(other, "hangard_reaper_passes_total")
    wait_for("the new holder keeps reaping", lambda: metric(other, "hangard_reaper_passes_total") > passes)
