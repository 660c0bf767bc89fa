"""Nothing outlives a local sandbox, however its processes die: the jail
(hangar-jail, the supervisor), bwrap or hangar-envd killed with SIGKILL
(what the OOM killer sends too), with a command and a background process
running and the network helper up. Once hangar reports the sandbox gone,
no process of it, no cgroup, no mount and no state directory is left."""

import os
import signal
import time

import pytest

from conftest import run_dir, wait_for


def descendants(pid):
    """pid and every process below it, from /proc's children lists."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(x) for x in f.read().split()]
        except FileNotFoundError:
            pass
    return out


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def cgroups_named(sid):
    found = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        if os.path.basename(root) == sid:
            found.append(root)
            dirs[:] = []
    return found


def mounts_naming(sid):
    with open("/proc/self/mountinfo") as f:
        return [line for line in f if sid in line]


# hangar-envd-init's comm keeps 15 bytes: the sandbox's pid 1.
@pytest.mark.parametrize("victim", ["hangar-jail", "bwrap", "hangar-envd-ini", "hangar-envd"])
def test_a_killed_sandbox_leaves_nothing(hangar, state_dir, victim):
    sid = hangar.ok("sandbox", "create", "--network", "on").stdout.decode().strip()
    try:
        hangar.ok("sandbox", "exec", sid, "--", "sh", "-c", "sleep 1000 >/dev/null 2>&1 & echo started")
        with open(os.path.join(run_dir(state_dir), sid, "jail.pid")) as f:
            jail = int(f.read())
        procs = descendants(jail)
        names = {p: comm(p) for p in procs}
        assert "slirp4netns" in names.values() and "sleep" in names.values(), names
        cgroups = cgroups_named(sid)
        assert cgroups, "a running sandbox has cgroups named by its id"
        target = jail if victim == "hangar-jail" else min(p for p, n in names.items() if n == victim)
        os.kill(target, signal.SIGKILL)

        def gone():
            r = hangar("sandbox", "info", sid)
            return r.returncode != 0 and b"gone" in r.stderr
        wait_for(f"sandbox {sid} reported gone after {victim} was killed", gone, timeout=30)
        wait_for("every process of the sandbox to end", lambda: not any(alive(p) for p in procs), timeout=30)
        assert cgroups_named(sid) == [], cgroups_named(sid)
        assert mounts_naming(sid) == []
        assert not os.path.exists(os.path.join(run_dir(state_dir), sid))
        assert not os.path.exists(os.path.join(state_dir, "local", sid))
    finally:
        hangar("sandbox", "kill", sid)
