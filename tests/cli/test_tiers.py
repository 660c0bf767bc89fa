"""hangar(1): --tier, hangar tier list and --events, against the local provider."""

import json
import os
import tempfile


def test_tier_list_shows_every_tier(hangar):
    r = hangar.ok("tier", "list")
    out = r.stdout.decode()
    lines = out.splitlines()
    assert lines[0].split() == ["TIER", "PROVIDER", "STATE"]
    for tier in ("fast", "isolated", "default", "heavy"):
        assert any(line.startswith(tier + " ") for line in lines), out
    # e2b has no key here: fast falls back to local.
    assert any(line.split()[:3] == ["fast", "e2b", "not"] for line in lines), out
    assert any(line.split()[:3] == ["local", "ready", "(fallback)"] for line in lines), out


def test_tier_list_json(hangar):
    env = {"HANGAR_TIERS": '{"fast":[],"isolated":["local","nosuch"],"heavy":["local"]}',
           "HANGAR_TIER_HEDGE": '{"heavy":250}'}
    tiers = {t["tier"]: t for t in json.loads(hangar.ok("tier", "list", "--json", env=env).stdout)}
    assert list(tiers) == ["fast", "isolated", "default", "heavy"]
    assert tiers["fast"]["falls_back"] is True
    assert [p["name"] for p in tiers["fast"]["providers"]] == ["local"]
    # local has no kernel boundary: it never serves isolated.
    assert [(p["name"], p["loaded"]) for p in tiers["isolated"]["providers"]] == [("local", False), ("nosuch", False)]
    assert tiers["isolated"]["falls_back"] is False
    assert tiers["heavy"]["hedge_ms"] == 250
    assert tiers["heavy"]["providers"] == [{"name": "local", "loaded": True, "fallback": False, "cooldown_seconds": 0}]


def test_tier_list_rejects_malformed_tiers(hangar):
    r = hangar("tier", "list", env={"HANGAR_TIERS": '{"turbo":["local"]}'})
    assert r.returncode == 1
    assert b"HANGAR_TIERS" in r.stderr


def test_run_with_a_tier_and_events_on_stderr(hangar):
    r = hangar.ok("--events", "run", "--tier", "fast", "--", "echo", "hi")
    assert r.stdout == b"hi\n"
    events = [json.loads(line) for line in r.stderr.decode().splitlines() if line.startswith("{")]
    names = [e["event"] for e in events]
    assert names == ["sandbox.created", "sandbox.killed"], r.stderr
    created = events[0]["data"]
    assert created["provider"] == "local" and created["tier"] == "fast"
    assert events[1]["data"] == {"id": created["id"], "provider": "local"}
    assert events[0]["time"].endswith("Z")


def test_events_to_a_file(hangar):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "events.jsonl")
        r = hangar.ok(f"--events={path}", "sandbox", "create", "--tier", "default")
        sid = r.stdout.decode().strip()
        assert r.stderr == b""
        hangar.ok(f"--events={path}", "sandbox", "kill", sid)
        assert oct(os.stat(path).st_mode & 0o777) == "0o600"
        with open(path) as f:
            events = [json.loads(line) for line in f]
    assert [(e["event"], e["data"]["id"]) for e in events] == [("sandbox.created", sid), ("sandbox.killed", sid)]
    assert events[0]["data"]["tier"] == "default"


def test_isolated_refuses_local(hangar):
    r = hangar("run", "--tier", "isolated", "--", "true")
    assert r.returncode == 1
    assert b"HANGAR_TIERS" in r.stderr
    r = hangar("run", "--tier", "isolated", "--provider", "local", "--", "true",
               env={"HANGAR_TIERS": '{"isolated":["local"]}'})
    assert r.returncode == 1
    assert b"kernel" in r.stderr
    r = hangar("sandbox", "create", "--tier", "turbo")
    assert r.returncode == 1
    assert b"tier" in r.stderr
