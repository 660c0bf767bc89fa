"""Fixtures for the Python binding tests.

meson passes where the package is built (HANGAR_PY_PATH, already on
PYTHONPATH), the daemon and jail to use, and the fake E2B control plane.
Every test session gets a state directory of its own; nothing here skips
when a provider is broken: those tests fail.
"""

import contextlib
import os
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

# The ASan runtime is preloaded for this interpreter only (run-pytest.sh):
# the daemons, jails and commands the tests start load their own.
if os.environ.get("HANGAR_PY_PRELOAD"):
    os.environ.pop("LD_PRELOAD", None)

for _name in [n for n in os.environ if n.startswith("HANGAR_")]:
    if _name not in ("HANGAR_ENVD_PATH", "HANGAR_JAIL_PATH") and not _name.startswith("HANGAR_PY_") \
            and _name not in ("HANGAR_SOURCE_ROOT", "HANGAR_BUILD_ROOT"):
        del os.environ[_name]
_STATE = tempfile.TemporaryDirectory(prefix="hangar-py-")
os.environ["HANGAR_STATE_DIR"] = _STATE.name
os.environ["HANGAR_SECRET_KEY"] = "python binding tests: a long enough secret key"

import hangar  # noqa: E402

API_KEY = "e2b_py_test_0123456789abcdef0123456789abcdef"


def test_package_is_the_one_under_test():
    # The build tree's (meson test), or the one pip installed (pip-suite.py).
    want = os.environ.get("HANGAR_PY_INSTALLED") or os.environ.get("HANGAR_PY_PATH")
    if want:
        assert os.path.realpath(hangar.__file__).startswith(os.path.realpath(want))


def _live_jails():
    """(pid, sandbox directory) of each hangar-jail supervising a sandbox of this run's state directory."""
    mine = os.path.join(_STATE.name, "")
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"/hangar-jail") and len(argv) > 2 and argv[1] == b"-dir" \
                and argv[2].decode(errors="replace").startswith(mine):
            found.append((int(entry), argv[2].decode(errors="replace")))
    return found


@pytest.fixture(scope="session", autouse=True)
def _no_sandbox_outlives_the_suite():
    """Every test kills what it starts: a jail still running at the end fails the run (and is stopped)."""
    yield
    left = _live_jails()
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    if left:
        pytest.fail("sandboxes still running after the suite: " + ", ".join(d for _, d in left))


def wait_for(what, cond, timeout=30.0, interval=0.02):
    """Polls cond() until it is true or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(interval)


class Fake:
    """A fake E2B control plane (tests/fakes/fake-e2b) of one flavour."""

    def __init__(self, flavour="cloud"):
        fake, envd = os.environ.get("FAKE_E2B"), os.environ.get("HANGAR_ENVD_PATH")
        if not fake or not envd:
            pytest.fail("FAKE_E2B and HANGAR_ENVD_PATH must be set (run through meson test)")
        r, w = os.pipe()
        self.proc = subprocess.Popen([fake, "--flavour", flavour, "--envd", envd, "--ready-fd", str(w),
                                      "--api-key", API_KEY], pass_fds=(w,))
        os.close(w)
        line = b""
        deadline = time.monotonic() + 20
        with os.fdopen(r, "rb", buffering=0) as f:
            while not line.endswith(b"\n"):
                ready, _, _ = select.select([f], [], [], max(0.0, deadline - time.monotonic()))
                assert ready, "fake-e2b did not get ready"
                chunk = f.read(64)
                assert chunk, "fake-e2b exited early"
                line += chunk
        _, api, edge = line.decode().split()
        self.api = f"http://127.0.0.1:{api}"
        self.settings = {
            "HANGAR_E2B_FLAVOR": flavour,
            "HANGAR_E2B_API_URL": self.api,
            "HANGAR_E2B_SANDBOX_URL": f"http://127.0.0.1:{edge}",
            "HANGAR_E2B_API_KEY": API_KEY,
            "HANGAR_E2B_REQUEST_TIMEOUT_SECONDS": "10",
        }

    def fault(self, body):
        import json
        import urllib.request

        req = urllib.request.Request(self.api + "/_fake/faults", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            assert 200 <= r.status < 300

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


@pytest.fixture(scope="session")
def fake():
    f = Fake("cloud")
    yield f
    f.stop()


@pytest.fixture
def ctx():
    return hangar.Context()


@pytest.fixture
def cloud_ctx(fake):
    return hangar.Context(settings=fake.settings)


@pytest.fixture(params=["local", "cloud"])
def target(request):
    """(context, provider name) for each provider the tests cover."""
    if request.param == "local":
        return hangar.Context(), "local"
    f = request.getfixturevalue("fake")
    return hangar.Context(settings=f.settings), "e2b"


@pytest.fixture
def sandbox(target):
    ctx, provider = target
    with hangar.Sandbox.create(ctx, provider=provider) as sb:
        yield sb


# The fake's sandboxes are hangar-envd processes on this host: a path in
# their /tmp is one in the host's. What a test writes there goes under a
# directory of its own that it removes through the same sandbox.


def scratch_path(what):
    """A path of the test's own under /tmp, unique to it."""
    return f"/tmp/hangar-py-{what}-{secrets.token_hex(4)}"


@contextlib.contextmanager
def removed_after(sb, path):
    """Yields path; removes it (a file or a tree) through sb at the end."""
    try:
        yield path
    finally:
        sb.files.remove(path)


@pytest.fixture
def scratch(sandbox):
    """A directory of the test's own in the sandbox, removed through it after the test."""
    with removed_after(sandbox, scratch_path("scratch")) as d:
        sandbox.files.make_dir(d)
        yield d


def remove_runtime_dirs(top):
    """Removes the runtime directories (on a tmpfs) that the state directories under top link to as local/run."""
    for root, dirs, _ in os.walk(top):
        if os.path.basename(root) == "local" and "run" in dirs and os.path.islink(os.path.join(root, "run")):
            shutil.rmtree(os.readlink(os.path.join(root, "run")), ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    remove_runtime_dirs(_STATE.name)
