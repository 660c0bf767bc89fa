"""examples/python: each script runs, and mypy --strict accepts it against the package."""

import json
import os
import secrets
import shutil
import socket
import string
import subprocess
import sys

import pytest

import hangar

TIMEOUT = 180


def examples_dir():
    return os.path.join(os.environ.get("HANGAR_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", "..")),
                        "examples", "python")


def example(name, *args, extra=None):
    env = dict(os.environ)
    if env.get("HANGAR_PY_PRELOAD"):
        env["LD_PRELOAD"] = env["HANGAR_PY_PRELOAD"]
    env.update(extra or {})
    return subprocess.run([sys.executable, os.path.join(examples_dir(), name), *args], env=env,
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=TIMEOUT)


def live_sandboxes():
    return [s.id for s in hangar.Context().sandboxes("local")]


def live_sessions():
    return [s.id for s in hangar.Session.list(hangar.Context()) if s.state != hangar.SESSION_ARCHIVED]


def test_run_passes_output_and_exit_status():
    before = live_sandboxes()
    token = secrets.token_hex(8)
    r = example("run.py", f"printf %s {token}; printf oops >&2; exit 7")
    assert r.returncode == 7, r.stderr
    assert r.stdout.decode() == token
    assert b"oops" in r.stderr
    assert live_sandboxes() == before, "run.py left its sandbox alive"


def test_run_reports_a_broken_setup():
    r = example("run.py", "true", extra={"HANGAR_DEFAULT_PROVIDER": "no-such-provider"})
    assert r.returncode == 1
    assert b"run: " in r.stderr and b"(not_found)" in r.stderr


def test_copy_round_trip(tmp_path):
    text = "".join(secrets.choice(string.ascii_letters + "\n") for _ in range(200_000))
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(text)
    r = example("copy_files.py", str(src), str(dst))
    assert r.returncode == 0, r.stderr
    assert dst.read_text() == text.upper()
    assert f": {len(text)} bytes from sandbox " in r.stdout.decode()
    r = example("copy_files.py", str(tmp_path / "absent"), str(tmp_path / "never"))
    assert r.returncode == 1 and b"(os)" in r.stderr
    assert not (tmp_path / "never").exists()


def test_tiers_falls_back_when_the_cloud_is_unreachable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        r = example("tiers.py", "fast", extra={
            "HANGAR_TIERS": json.dumps({"fast": ["e2b"]}),
            "HANGAR_E2B_FLAVOR": "cloud",
            "HANGAR_E2B_API_KEY": "e2b_" + secrets.token_hex(20),
            "HANGAR_E2B_API_URL": f"http://127.0.0.1:{port}",
            "HANGAR_E2B_DOMAIN": "sandbox.invalid",
        })
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr
    assert "tier fast: e2b local [fallback]" in out
    events = [json.loads(line.split(" ", 2)[2]) for line in out.splitlines()
              if line.startswith("event sandbox.tier_fallback ")]
    assert events and events[0]["from"] == "e2b" and events[0]["to"] == "local"
    assert events[0]["reason"] == "unreachable"
    assert " on local through tier fast" in out
    assert any(line.startswith("event sandbox.killed ") for line in out.splitlines())


def test_tiers_isolated_never_falls_back():
    r = example("tiers.py", "isolated", extra={"HANGAR_TIERS": json.dumps({"isolated": []})})
    assert r.returncode == 1
    assert b"tiers: create:" in r.stderr


def test_session_over_two_turns():
    before = live_sessions()
    r = example("session.py")
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr
    assert "suspended: parked" in out and "resumed hot" in out
    assert "notes: draft one\n" in out
    assert "conversation: user: keep the notes\n" in out
    assert live_sessions() == before, "the session was not deleted"
    r = example("session.py", "--keep")
    assert r.returncode == 0, r.stderr
    sid = r.stdout.decode().splitlines()[0].split()[1]
    assert sid in live_sessions()
    hangar.Session.open(hangar.Context(), sid).delete()


def test_fan_out_runs_at_once_and_cancels_at_the_deadline():
    before = live_sandboxes()
    r = example("fan_out.py", "echo one", "echo two; exit 3", "echo three")
    out = r.stdout.decode()
    assert r.returncode == 1, r.stderr
    for i, (word, code) in enumerate((("one", 0), ("two", 3), ("three", 0))):
        assert f"[{i}] exit {code} in " in out and f"\n{word}\n" in out
    assert live_sandboxes() == before
    r = example("fan_out.py", "--timeout", "3", "echo quick", "sleep 300")
    assert r.returncode == 1 and "[0] exit 0" in r.stdout.decode()
    assert b"1 command(s) cancelled after 3.0 s" in r.stderr, r.stderr
    assert live_sandboxes() == before, "a cancelled command left its sandbox alive"


def test_mypy_strict_accepts_the_examples_and_the_package(tmp_path):
    mypy = shutil.which("mypy")
    if not mypy:
        if os.environ.get("HANGAR_PY_REQUIRED") == "1":
            pytest.fail("mypy is not installed (Debian: mypy), and -Dpython=enabled requires this test")
        pytest.skip("mypy is not installed (Debian: mypy)")
    src = os.environ.get("HANGAR_PY_SOURCE") or os.path.join(examples_dir(), "..", "..", "bindings", "python")
    env = dict(os.environ, MYPYPATH=src)
    env.pop("LD_PRELOAD", None)
    for target in (examples_dir(), os.path.join(src, "hangar")):
        r = subprocess.run([mypy, "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), target],
                           env=env, capture_output=True, timeout=300)
        assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
    # And it can fail: a wrong type in a copy of an example is caught.
    bad = tmp_path / "bad.py"
    bad.write_text("import hangar\n\n\ndef f(sb: hangar.Sandbox) -> str:\n    return sb.exec('true').stdout\n")
    r = subprocess.run([mypy, "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), str(bad)],
                       env=env, capture_output=True, timeout=300)
    assert r.returncode == 1 and b"Incompatible return value" in r.stdout, r.stdout
