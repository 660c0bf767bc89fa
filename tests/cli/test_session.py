"""hangar session create|list|info|exec|suspend|resume|fork|keep|archive|delete|reap, end to end on local sandboxes."""

import json
import re

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
