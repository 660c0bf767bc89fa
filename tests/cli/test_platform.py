"""hangar sandbox fork, logs and metrics: against the local provider (which
has no fork; its metrics and logs are its limits and the limits it reached)
and against the fake E2B cloud control plane (which has
all three), when tests/fakes is built."""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fakes"))
from fakee2b import FakeE2B, FakeE2BMissing  # noqa: E402

API_KEY = "e2b_cli_test_key"


def test_usage(hangar):
    r = hangar("sandbox", "fork", "abc", "--count", "0")
    assert r.returncode == 2 and b"--count" in r.stderr
    r = hangar("sandbox", "fork")
    assert r.returncode == 2 and b"missing sandbox id" in r.stderr
    r = hangar("sandbox", "logs", "a", "b")
    assert r.returncode == 2
    for verb in ("fork", "logs", "metrics"):
        r = hangar.ok("sandbox", verb, "--help")
        assert f"sandbox {verb} ID".encode() in r.stdout


def test_local_has_no_fork(hangar, sandbox):
    r = hangar("sandbox", "fork", sandbox)
    assert r.returncode == 1, r.stderr
    assert b"provider local" in r.stderr, r.stderr
    # Logs: the limits it reached, none yet.
    r = hangar.ok("sandbox", "logs", sandbox)
    assert r.stdout == b""
    # Metrics and info: its limits (the defaults) and what it uses of them.
    samples = json.loads(hangar.ok("sandbox", "metrics", sandbox, "--json").stdout)
    assert len(samples) == 1 and samples[0]["cpu_count"] == 2
    assert samples[0]["mem_total_bytes"] == 2048 << 20 and samples[0]["disk_total_bytes"] > 0
    info = hangar.ok("sandbox", "info", sandbox).stdout.decode()
    assert "memory:" in info and "of 2048 MiB" in info and "cpus:      2" in info


@pytest.fixture
def fake_cloud():
    try:
        fake = FakeE2B("cloud", api_key=API_KEY)
    except FakeE2BMissing:
        pytest.skip("FAKE_E2B is not built (tests/fakes)")
    with fake:
        yield dict(fake.settings(), HANGAR_SECRET_KEY="a secret key for the cli tests, long enough")


def test_e2b_fork_logs_metrics(hangar, fake_cloud):
    sid = hangar.ok("sandbox", "create", "--provider", "e2b", env=fake_cloud).stdout.decode().strip()
    forks = hangar.ok("sandbox", "fork", sid, "--count", "2", env=fake_cloud).stdout.decode().split()
    assert len(forks) == 2 and sid not in forks
    for f in forks + [sid]:
        out = hangar.ok("sandbox", "exec", f, "--", "echo", "hi", env=fake_cloud).stdout
        assert out == b"hi\n"
    logs = hangar.ok("sandbox", "logs", forks[0], env=fake_cloud).stdout.decode()
    assert "forked from " + sid in logs
    entries = json.loads(hangar.ok("sandbox", "logs", sid, "--json", env=fake_cloud).stdout)
    assert entries and all({"timestamp", "level", "message"} <= set(e) for e in entries)
    samples = json.loads(hangar.ok("sandbox", "metrics", sid, "--json", env=fake_cloud).stdout)
    assert samples and samples[0]["cpu_count"] > 0 and samples[0]["mem_total_bytes"] > 0
    table = hangar.ok("sandbox", "metrics", sid, env=fake_cloud).stdout.decode().splitlines()
    assert table[0].split()[:2] == ["TIME", "CPUS"] and len(table) >= 2
    for f in forks + [sid]:
        hangar.ok("sandbox", "kill", f, env=fake_cloud)
