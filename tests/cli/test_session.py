"""hangar session create|list|info|exec|suspend|resume|fork|keep|archive|delete|reap, end to end on local sandboxes."""

import json
import os
import re
import signal
import subprocess

import pytest

from conftest import wait_for

KEY = {"HANGAR_SECRET_KEY": "cli session tests key"}


def run(hangar, *args, env=None):
    e = dict(KEY)
    if env:
        e.update(env)
    return hangar.ok(*args, env=e).stdout.decode()


def info(hangar, sid):
    return json.loads(run(hangar, "session", "info", sid, "--json"))


def create(hangar, *args):
    sid = run(hangar, "session", "create", "--quiet", *args).strip()
    assert sid and "\n" not in sid
    return sid


def test_suspend_parks_and_resume_is_hot(hangar):
    sid = create(hangar, "--label", "agent=cli")
    try:
        run(hangar, "session", "exec", sid, "--",
            "cd /workspace && git init -q && git config user.email t@example.org && git config user.name t && "
            "echo one > a.txt && git add a.txt && git commit -qm first && mkdir -p .venv && echo x > .venv/y && "
            "printf '.venv/\\n' > .gitignore")
        before = info(hangar, sid)
        assert before["state"] == "active"
        assert before["labels"] == {"agent": "cli"}

        r = hangar("session", "suspend", sid, "--blob", "-", env=KEY, input=b"conversation")
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode().startswith("parked " + before["sandbox"])
        parked = info(hangar, sid)
        assert parked["state"] == "parked"
        assert parked["parked_since_us"] > 0
        assert run(hangar, "checkpoint", "blob", parked["checkpoint"]) == "conversation"

        r = hangar("session", "resume", sid, env=KEY)
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode().strip() == before["sandbox"]
        assert b"hot resume" in r.stderr
        out = run(hangar, "session", "exec", sid, "--", "cat /workspace/.venv/y /workspace/a.txt")
        assert out == "x\none\n"
    finally:
        hangar("session", "delete", sid, env=KEY)


def test_no_park_then_cold_resume_restores(hangar):
    sid = create(hangar)
    try:
        run(hangar, "session", "exec", sid, "--", "echo kept > /workspace/f && mkdir -p /workspace/d")
        out = run(hangar, "session", "suspend", sid, "--no-park")
        assert "not parked: the caller asked not to park" in out
        assert info(hangar, sid)["sandbox"] == ""
        # exec wakes it: a new sandbox with the checkpoint restored.
        assert run(hangar, "session", "exec", sid, "--", "cat /workspace/f") == "kept\n"
        i = info(hangar, sid)
        assert i["state"] == "active"
        assert i["last_resume"] == "cold"
        assert "not to park" in i["last_resume_reason"]
    finally:
        hangar("session", "delete", sid, env=KEY)


def test_fork_keep_archive_delete(hangar):
    sid = create(hangar)
    forks = []
    try:
        run(hangar, "session", "exec", sid, "--", "echo parent > /workspace/p")
        r = hangar("session", "fork", sid, "--count", "2", env=KEY)
        assert r.returncode == 0, r.stderr
        forks = r.stdout.decode().split()
        assert len(forks) == 2 and sid not in forks
        for f in forks:
            assert run(hangar, "session", "exec", f, "--", "cat /workspace/p") == "parent\n"
            assert info(hangar, f)["parent"] == sid
        run(hangar, "session", "keep", forks[0])
        assert info(hangar, forks[1])["state"] == "archived"
        assert info(hangar, forks[0])["state"] == "active"
        listed = {s["id"]: s["state"] for s in json.loads(run(hangar, "session", "list", "--json"))}
        assert listed[sid] == "active" and listed[forks[1]] == "archived"

        run(hangar, "session", "archive", forks[0])
        r = hangar("session", "resume", forks[0], env=KEY)
        assert r.returncode == 1
        assert b"archived" in r.stderr
    finally:
        for s in [sid, *forks]:
            hangar("session", "delete", s, env=KEY)
    listed = [s["id"] for s in json.loads(run(hangar, "session", "list", "--json"))]
    assert sid not in listed


def test_reap_and_errors(hangar):
    sid = create(hangar)
    try:
        run(hangar, "session", "suspend", sid)
        assert info(hangar, sid)["state"] == "parked"
        # Past a cap of 0 parked sandboxes, the reaper takes it.
        assert run(hangar, "session", "reap", env={"HANGAR_SESSION_HOT_RESUME_MAX": "0"}).strip() == "1"
        i = info(hangar, sid)
        assert i["state"] == "suspended" and "reaped" in i["suspend_reason"]
        assert run(hangar, "session", "reap").strip() == "0"
    finally:
        hangar("session", "delete", sid, env=KEY)

    r = hangar("session", "info", "ses-none", env=KEY)
    assert r.returncode == 1 and b"no session ses-none" in r.stderr
    r = hangar("session", "info", env=KEY)
    assert r.returncode == 2
    r = hangar("session", "fork", "x", "--count", "101", env=KEY)
    assert r.returncode == 2
    r = hangar("session", "create", "--id", "bad id", env=KEY)
    assert r.returncode == 1
    r = hangar("session", "create", "--label", "nolabel", env=KEY)
    assert r.returncode == 2


def test_json_integers_are_exact(hangar):
    # Times in microseconds are past 2^50: written through a double with 15
    # digits they would come out as 1.79617579301415e+15.
    import re
    sid = create(hangar)
    try:
        text = run(hangar, "session", "info", sid, "--json")
        numbers = dict(re.findall(r'"(created_us|updated_us|parked_since_us)":(-?[0-9][0-9.eE+-]*)', text))
        assert {"created_us", "updated_us"} <= set(numbers), text
        for name, value in numbers.items():
            assert re.fullmatch(r"-?[0-9]+", value), (name, value)
        assert int(numbers["created_us"]) > 1 << 50
    finally:
        run(hangar, "session", "delete", sid)


def _temp_blobs(state_dir):
    d = os.path.join(state_dir, "checkpoints")
    return [n for n in os.listdir(d) if n.startswith(".") and n.endswith(".tmp")] if os.path.isdir(d) else []


@pytest.mark.parametrize("signo", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_suspend_stopped_by_a_signal_stores_nothing(hangar, state_dir, signo):
    sid = create(hangar)
    try:
        # Enough incompressible data that the capture is still writing when the signal comes.
        run(hangar, "session", "exec", sid, "--", "head -c 200000000 /dev/urandom > /workspace/big")
        before = info(hangar, sid)
        checkpoints = run(hangar, "checkpoint", "list", "--session", sid, "--json")
        e = dict(hangar.env)
        e.update(KEY)
        p = subprocess.Popen(hangar.argv("session", "suspend", sid), env=e, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            # The capture is under way once its sealed object is being written.
            wait_for("the capture to start writing", lambda: _temp_blobs(state_dir), timeout=60, interval=0.01)
            p.send_signal(signo)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode == 128 + signo, err
        # Nothing stored, nothing left half-made, the session as it was.
        assert run(hangar, "checkpoint", "list", "--session", sid, "--json") == checkpoints
        assert _temp_blobs(state_dir) == []
        after = info(hangar, sid)
        assert after["state"] == "active" and after["sandbox"] == before["sandbox"], after
        # The lease was given up: a call that does not wait gets the session at once.
        r = hangar("session", "suspend", sid, "--no-park", env=dict(KEY, HANGAR_SESSION_BUSY_WAIT_SECONDS="0"))
        assert r.returncode == 0, r.stderr
    finally:
        hangar("session", "delete", sid, env=KEY)


def _snapshot_under_way(state_dir):
    d = os.path.join(state_dir, "local", "snapshots")
    return [n for n in os.listdir(d) if n.startswith(".new-")] if os.path.isdir(d) else []


def test_fork_stopped_by_a_signal_keeps_nothing(hangar, state_dir):
    sid = create(hangar)
    try:
        run(hangar, "session", "exec", sid, "--", "head -c 200000000 /dev/urandom > /workspace/big")
        checkpoints = run(hangar, "checkpoint", "list", "--session", sid, "--json")
        sessions = json.loads(run(hangar, "session", "list", "--json"))
        sandboxes = json.loads(run(hangar, "sandbox", "list", "--json"))
        e = dict(hangar.env)
        e.update(KEY)
        p = subprocess.Popen(hangar.argv("session", "fork", sid, "--count", "2"), env=e, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            if os.geteuid() == 0:
                # A root caller's local fork goes by snapshot: under way once the snapshot is being copied.
                wait_for("the fork's snapshot to start", lambda: _snapshot_under_way(state_dir), timeout=60,
                         interval=0.01)
            else:
                # By checkpoint: under way once its sealed object is being written.
                wait_for("the fork's capture to start writing", lambda: _temp_blobs(state_dir), timeout=60,
                         interval=0.01)
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode == 128 + signal.SIGTERM, err
        assert out == b""
        # No checkpoint, no session, no sandbox kept; nothing half-made.
        assert run(hangar, "checkpoint", "list", "--session", sid, "--json") == checkpoints
        assert json.loads(run(hangar, "session", "list", "--json")) == sessions
        assert len(json.loads(run(hangar, "sandbox", "list", "--json"))) == len(sandboxes)
        assert _temp_blobs(state_dir) == []
        assert info(hangar, sid)["state"] == "active"
        r = hangar("session", "suspend", sid, "--no-park", env=dict(KEY, HANGAR_SESSION_BUSY_WAIT_SECONDS="0"))
        assert r.returncode == 0, r.stderr
    finally:
        hangar("session", "delete", sid, env=KEY)
