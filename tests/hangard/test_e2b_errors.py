"""hangard's error mapping with failures the e2b fake injects (POST
/_fake/faults): a full or unavailable platform is 503 with the Retry-After
it asked for, a tier moves past it to the next provider (an event and a
counter say so), a platform that answers too late is 504, and a server
whose workers are all busy is 503 at once."""

import os
import shutil
import tempfile
import threading

import pytest

from conftest import READER, wait_for
from test_api import parse_prometheus
from test_e2b import Events, exec_ok, on_fake, shared_dir


def samples(server):
    r = server.ok("GET", "/metrics", token=READER)
    return parse_prometheus(r.body.decode())[0]


def fallbacks(server):
    return samples(server)[("hangard_tier_fallbacks_total", frozenset())]


def test_a_tier_falls_back_from_an_unavailable_e2b_to_local(make_fake, make_server, workdir):
    fake = make_fake("cloud")
    # local is the default provider; the fast tier tries e2b first.
    s = on_fake(make_server, workdir, fake, HANGAR_DEFAULT_PROVIDER="local", HANGAR_TIERS='{"fast":["e2b","local"]}')
    tiers = {t["name"]: t for t in s.ok("GET", "/v1/tiers", token=READER).json()["tiers"]}
    assert [(p["name"], p["loaded"]) for p in tiers["fast"]["providers"]] == [("e2b", True), ("local", True)]
    assert fallbacks(s) == 0
    sub = Events(s)
    sid = None
    try:
        fake.fault(route="create", status=503)
        sb = s.ok("POST", "/v1/sandboxes", {"tier": "fast", "timeout": 600}, status=201).json()
        sid = sb["id"]
        assert sb["provider"] == "local", sb
        assert fake.sandboxes() == {}  # the 503 made nothing on the platform
        ev = sub.events("sandbox.tier_fallback")
        assert (ev["tier"], ev["from"], ev["to"], ev["reason"], ev["http_status"]) == \
            ("fast", "e2b", "local", "unavailable", 503), ev
        assert ev["cooldown_seconds"] == 60, ev  # HANGAR_TIER_COOLDOWN_SECONDS's default
        ev = sub.events("sandbox.created")
        assert ev["id"] == sid and ev["provider"] == "local", ev
        assert fallbacks(s) == 1
        # e2b cools down: the tier says until when.
        fast = [t for t in s.ok("GET", "/v1/tiers").json()["tiers"] if t["name"] == "fast"][0]
        assert fast["providers"][0]["name"] == "e2b" and fast["providers"][0]["cooling_until_us"] > 0, fast
        assert exec_ok(s, sid, "echo on local") == "on local\n"
    finally:
        sub.close()
        if sid:
            s.request("DELETE", f"/v1/sandboxes/{sid}")


@pytest.mark.parametrize("flavour", ["cloud", "cube"])
def test_unavailable_is_503_with_the_platforms_retry_after(make_fake, make_server, workdir, flavour):
    fake = make_fake(flavour)
    # e2b is the default provider and the default tier lists no other: nothing to fall back to.
    s = on_fake(make_server, workdir, fake)
    fake.fault(route="create", status=503, retry_after=7)
    r = s.request("POST", "/v1/sandboxes", {"timeout": 600})
    assert r.status == 503, r
    assert r.header("Retry-After") == "7", r.headers
    err = r.json()["error"]
    assert err["kind"] == "unavailable" and err["retry_after_s"] == 7, err
    assert "503" in err["message"], err
    assert fake.sandboxes() == {}
    assert fallbacks(s) == 0


def test_a_named_provider_gets_no_fallback_and_the_retry_after(make_fake, make_server, workdir):
    fake = make_fake("cloud")
    s = on_fake(make_server, workdir, fake, HANGAR_DEFAULT_PROVIDER="local", HANGAR_TIERS='{"fast":["e2b","local"]}')
    fake.fault(route="create", status=503, retry_after=7)
    r = s.request("POST", "/v1/sandboxes", {"provider": "e2b", "tier": "fast"})
    assert r.status == 503 and r.header("Retry-After") == "7", r
    assert r.json()["error"]["retry_after_s"] == 7, r
    assert s.ok("GET", "/v1/sandboxes").json()["sandboxes"] == []
    assert fallbacks(s) == 0


def test_a_full_platform_is_503_capacity(make_fake, make_server, workdir):
    fake = make_fake("cloud")
    s = on_fake(make_server, workdir, fake)
    fake.fault(route="create", status=429, retry_after=9)
    r = s.request("POST", "/v1/sandboxes", {})
    assert r.status == 503 and r.header("Retry-After") == "9", r
    err = r.json()["error"]
    assert err["kind"] == "capacity" and err["retry_after_s"] == 9, err


def test_a_platform_answering_too_late_is_504(make_fake, make_server, workdir):
    fake = make_fake("cloud")
    s = on_fake(make_server, workdir, fake, HANGAR_E2B_REQUEST_TIMEOUT_SECONDS="1")
    # The fake holds the create 4 s, then refuses it: no sandbox is ever made.
    fake.fault(route="create", delay_ms=4000, status=503)
    r = s.request("POST", "/v1/sandboxes", {"timeout": 600})
    assert r.status == 504, r
    err = r.json()["error"]
    assert err["kind"] == "timeout", err
    assert "no answer within 1000 ms" in err["message"], err
    assert r.header("Retry-After") is None, r.headers


def test_a_lifecycle_call_answered_too_late_is_504(make_fake, make_server, workdir):
    fake = make_fake("cloud")
    # One replica makes the sandbox with the usual patience; another, on the
    # same state, waits 1 s for the platform's answers.
    state = tempfile.mkdtemp(dir=workdir, prefix="hangard-504-")
    maker = on_fake(make_server, workdir, fake, state_dir=state, HANGARD_REAPER_INTERVAL_SECONDS="0")
    impatient = on_fake(make_server, workdir, fake, state_dir=state, HANGARD_REAPER_INTERVAL_SECONDS="0",
                        HANGAR_E2B_REQUEST_TIMEOUT_SECONDS="1")
    sid = maker.ok("POST", "/v1/sandboxes", {"timeout": 600}, status=201).json()["id"]
    try:
        fake.fault(route="pause", delay_ms=4000, status=503)
        r = impatient.request("POST", f"/v1/sandboxes/{sid}/pause")
        assert r.status == 504 and r.json()["error"]["kind"] == "timeout", r
        # Nothing paused it: the fake refused after hangard gave up.
        assert fake.sandboxes()[sid]["state"] == "running"
        assert exec_ok(impatient, sid, "echo still here") == "still here\n"
    finally:
        maker.request("DELETE", f"/v1/sandboxes/{sid}")


def test_every_worker_busy_is_503_at_once(make_fake, make_server, workdir):
    fake = make_fake("cloud")
    # One worker and a queue of one: a request running and one waiting fill it.
    s = on_fake(make_server, workdir, fake, HANGARD_WORKERS="1", HANGARD_QUEUE="1",
                HANGARD_REAPER_INTERVAL_SECONDS="0")
    sid = s.ok("POST", "/v1/sandboxes", {"timeout": 600}, status=201).json()["id"]
    gate = shared_dir("hangard-busy-")
    started, go = os.path.join(gate, "started"), os.path.join(gate, "go")
    results = {}

    def call(name, method, path, body=None):
        results[name] = s.request(method, path, body)

    blocker = threading.Thread(target=call, args=("exec", "POST", f"/v1/sandboxes/{sid}/exec", {
        "command": f"touch {started}; until [ -e {go} ]; do sleep 0.05; done; echo released", "timeout": 120}))
    waiting = []
    try:
        blocker.start()
        # The only worker is inside the command (the fake's sandboxes see the host's files).
        wait_for("the command to run", lambda: os.path.exists(started), timeout=60)
        # Two more: one takes the queue's place, the other finds it full,
        # whichever comes first.
        waiting = [threading.Thread(target=call, args=(n, "GET", f"/v1/sandboxes/{sid}")) for n in ("a", "b")]
        for t in waiting:
            t.start()
        wait_for("one of them answered", lambda: "a" in results or "b" in results, timeout=60)
        assert not ("a" in results and "b" in results), results
        refused = results.get("a") or results.get("b")
        assert refused.status == 503, refused
        assert refused.header("Retry-After") == "1", refused.headers
        err = refused.json()["error"]
        assert err["kind"] == "capacity" and "every worker is busy" in err["message"], err
        assert "exec" not in results
    finally:
        open(go, "w").close()
        blocker.join(timeout=120)
        for t in waiting:
            t.join(timeout=120)
        shutil.rmtree(gate, ignore_errors=True)
    # The queued one was served once the worker was free; the command was never cut.
    statuses = sorted(results[n].status for n in ("a", "b"))
    assert statuses == [200, 503], results
    out = results["exec"].json()
    assert results["exec"].status == 200 and out["exit_code"] == 0 and out["stdout"] == "released\n", out
    s.ok("DELETE", f"/v1/sandboxes/{sid}", status=204)
