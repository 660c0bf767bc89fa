"""hangar sandbox fork, logs and metrics: against the local provider (which
has no fork; its metrics and logs are its limits and the limits it reached)
and against the fake E2B cloud control plane (which has
all three), when tests/fakes is built."""

import json
import os
import select
import signal
import subprocess

import pytest

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
    fake, envd = os.environ.get("FAKE_E2B"), os.environ.get("HANGAR_ENVD_PATH")
    if not fake or not os.access(fake, os.X_OK) or not envd:
        pytest.skip("FAKE_E2B is not built (tests/fakes)")
    r, w = os.pipe()
    proc = subprocess.Popen([fake, "--flavour", "cloud", "--envd", envd, "--ready-fd", str(w),
                             "--api-key", API_KEY], pass_fds=(w,))
    os.close(w)
    line = b""
    with os.fdopen(r, "rb", buffering=0) as f:
        while not line.endswith(b"\n"):
            ready, _, _ = select.select([f], [], [], 20)
            assert ready, "fake-e2b did not get ready"
            chunk = f.read(64)
            assert chunk, "fake-e2b exited early"
            line += chunk
    _, api, edge = line.decode().split()
    yield {
        "HANGAR_E2B_FLAVOR": "cloud",
        "HANGAR_E2B_API_URL": f"http://127.0.0.1:{api}",
        "HANGAR_E2B_SANDBOX_URL": f"http://127.0.0.1:{edge}",
        "HANGAR_E2B_API_KEY": API_KEY,
        "HANGAR_SECRET_KEY": "a secret key for the cli tests, long enough",
    }
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


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
