"""Fixtures that run the real hangar binary against the local provider.

meson passes the binaries' paths (HANGAR_CLI, HANGAR_ENVD_PATH,
HANGAR_JAIL_PATH) and the source root. Every test session gets a state
directory of its own; whatever sandboxes are left in it at the end are
killed. Nothing here skips when the provider is broken: those tests fail.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

COMMAND_TIMEOUT = 120


def cli_binary():
    path = os.environ.get("HANGAR_CLI")
    if not path:
        pytest.skip("HANGAR_CLI is not set (run through meson test)")
    if not os.access(path, os.X_OK):
        pytest.fail(f"HANGAR_CLI={path} is not executable")
    return path


def setting_names():
    """The HANGAR_* settings documented in include/hangar/context.h."""
    root = os.environ.get("HANGAR_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "include", "hangar", "context.h")) as f:
        text = f.read()
    block = text[text.index("Settings"):text.index("*/", text.index("Settings"))]
    names = re.findall(r"^\s*\*\s+(HANGAR_[A-Z0-9_]+)", block, re.M)
    assert names, "no settings found in context.h"
    return names


class Hangar:
    """Runs hangar with a clean environment of its own."""

    def __init__(self, state_dir):
        self.binary = cli_binary()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HANGAR_")}
        for name in ("HANGAR_ENVD_PATH", "HANGAR_JAIL_PATH"):
            if os.environ.get(name):
                self.env[name] = os.environ[name]
        self.env["HANGAR_STATE_DIR"] = state_dir

    def argv(self, *args):
        return [self.binary, *args]

    def __call__(self, *args, env=None, input=None, timeout=COMMAND_TIMEOUT):
        e = dict(self.env)
        if env:
            e.update(env)
        return subprocess.run(
            self.argv(*args),
            env=e,
            input=input,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=None if input is not None else subprocess.DEVNULL,
            timeout=timeout,
        )

    def ok(self, *args, **kw):
        r = self(*args, **kw)
        assert r.returncode == 0, f"hangar {' '.join(args)} exited {r.returncode}: {r.stderr.decode(errors='replace')}"
        return r

    def ids(self):
        r = self.ok("sandbox", "list", "--json")
        return [s["id"] for s in json.loads(r.stdout)]


def wait_for(what, cond, timeout=30, interval=0.05):
    """Polls cond() until it is true or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(interval)


def run_dir(state_dir):
    """Where state_dir's running local sandboxes have their directories: local/run's target, else local/."""
    link = os.path.join(state_dir, "local", "run")
    return os.readlink(link) if os.path.islink(link) else os.path.join(state_dir, "local")
def remove_runtime_dirs(top):
    """Removes the runtime directories (on a tmpfs) that the state directories under top link to as local/run."""
    for root, dirs, _ in os.walk(top):
        if os.path.basename(root) == "local" and "run" in dirs and os.path.islink(os.path.join(root, "run")):
            shutil.rmtree(os.readlink(os.path.join(root, "run")), ignore_errors=True)


@pytest.fixture(scope="session")
def state_dir():
    with tempfile.TemporaryDirectory(prefix="hangar-cli-") as d:
        yield d
        remove_runtime_dirs(d)


@pytest.fixture(scope="session")
def hangar(state_dir):
    h = Hangar(state_dir)
    yield h
    # Leave nothing running behind.
    r = h("sandbox", "list", "--json")
    if r.returncode == 0:
        for s in json.loads(r.stdout):
            h("sandbox", "kill", s["id"])


@pytest.fixture
def sandbox(hangar):
    r = hangar.ok("sandbox", "create")
    sid = r.stdout.decode().strip()
    yield sid
    hangar("sandbox", "kill", sid)
