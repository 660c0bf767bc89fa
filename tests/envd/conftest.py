"""Fixtures that run a real hangar-envd for each test.

The daemon is told to listen on an ephemeral port (-port 0) and to report
"ready <port>" on an inherited pipe (-ready-fd), which is read with a
deadline. At teardown the daemon must still be running and answering
/health; a test whose daemon died fails even if its own assertions passed.
"""

import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from envdwire import Client, read_ready  # noqa: E402

READY_TIMEOUT = 10


def envd_binary():
    path = os.environ.get("HANGAR_ENVD")
    if not path:
        pytest.skip("HANGAR_ENVD is not set (run through meson test)")
    if not os.access(path, os.X_OK):
        pytest.fail(f"HANGAR_ENVD={path} is not executable")
    return path


def worker_binary():
    """hangar-envd-archive, the checkpoint worker, where hangar-envd looks for it: beside it."""
    return os.path.join(os.path.dirname(envd_binary()), "hangar-envd-archive")


class Daemon:
    def __init__(self, args, token=None, pass_fds=(), env=None, binary=None):
        self.token = token
        self.args = args
        self.log = tempfile.TemporaryFile()
        rfd, wfd = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [binary or envd_binary(), "-addr", "127.0.0.1", "-port", "0", "-ready-fd", str(wfd)] + args,
                pass_fds=(wfd,) + tuple(pass_fds),
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=self.log,
                env=env if env is not None else
                {k: v for k, v in os.environ.items() if k != "HANGAR_ENVD_ACCESS_TOKEN"},
            )
        finally:
            os.close(wfd)
        try:
            self.port = self._read_ready(rfd)
        finally:
            os.close(rfd)
        self.client = Client(self.port, token=token)

    def _read_ready(self, fd):
        try:
            return read_ready(fd, self.proc, READY_TIMEOUT)
        except AssertionError as e:
            self.kill()
            pytest.fail(f"{e}: {self.output()}")

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def alive(self):
        return self.proc.poll() is None

    def check_healthy(self):
        """The daemon survived the test: still running and answering /health."""
        if not self.alive():
            rc = self.proc.returncode
            how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"status {rc}"
            return f"hangar-envd died during the test ({how}); output:\n{self.output()}"
        deadline = time.monotonic() + 10
        while True:
            status = self.client.health(timeout=5)
            if status == 204:
                return None
            if time.monotonic() > deadline:
                return f"hangar-envd stopped answering /health (last: {status}); output:\n{self.output()}"
            time.sleep(0.1)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


@pytest.fixture
def make_envd(tmp_path):
    """Factory: make_envd(token=True, user=..., workdir=..., env={...}, extra=[...], binary=PATH)."""
    daemons = []

    def start(token=False, user=None, workdir=None, env=None, extra=(), binary=None):
        args = []
        tok = None
        if token:
            tok = token if isinstance(token, str) else secrets.token_hex(32)
            path = tmp_path / f"token-{len(daemons)}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(tok + "\n")
            args += ["-token-file", str(path)]
        if user:
            args += ["-user", user]
        if workdir:
            args += ["-workdir", str(workdir)]
        for k, v in (env or {}).items():
            args += ["-env", f"{k}={v}"]
        args += list(extra)
        d = Daemon(args, token=tok, binary=binary)
        daemons.append(d)
        return d

    yield start

    problems = []
    for d in daemons:
        msg = d.check_healthy()
        if msg:
            problems.append(msg)
        d.kill()
    if problems:
        pytest.fail("\n".join(problems))


@pytest.fixture
def envd(make_envd):
    """A daemon with no token, running as the current user."""
    return make_envd()


@pytest.fixture
def client(envd):
    return envd.client
