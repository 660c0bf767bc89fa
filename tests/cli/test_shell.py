"""hangar sandbox shell, driven through a pseudo-terminal as a person would."""

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time

import pytest

DEADLINE = 30


def set_winsize(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Terminal:
    """hangar sandbox shell ID on the slave side of a new pty, as its controlling terminal."""

    def __init__(self, hangar, sid, rows=24, cols=80):
        self.master, self.slave = os.openpty()
        set_winsize(self.master, rows, cols)
        self.saved = termios.tcgetattr(self.slave)
        slave = self.slave

        def become_session_leader():
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(hangar.argv("sandbox", "shell", sid), env=hangar.env, stdin=slave,
                                     stdout=slave, stderr=slave, preexec_fn=become_session_leader)
        self.output = b""

    def send(self, data):
        os.write(self.master, data)

    def read_some(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: every slave descriptor is closed
            return False
        self.output += chunk
        return bool(chunk)

    def expect(self, pattern, timeout=DEADLINE):
        """Reads until pattern matches the output since the last expect()."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            m = rx.search(self.output)
            if m:
                self.output = self.output[m.end():]
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no {pattern!r} in the terminal output within {timeout}s: {self.output[-2000:]!r}")
            self.read_some(min(left, 0.5))

    def wait(self, timeout=DEADLINE):
        """Waits for hangar to exit, draining the terminal meanwhile."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail(f"hangar sandbox shell did not exit: {self.output[-2000:]!r}")
            self.read_some(0.1)
        return self.proc.returncode

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def terminal(hangar, sandbox):
    terms = []

    def make(**kw):
        t = Terminal(hangar, sandbox, **kw)
        terms.append(t)
        return t

    yield make
    for t in terms:
        t.close()


def test_shell_runs_commands_and_exits_with_the_status(terminal):
    t = terminal()
    t.send(b"echo $((6*7))\n")
    t.expect(rb"(^|[\r\n])42\r?\n")
    t.send(b"exit 3\n")
    assert t.wait() == 3
    # The local terminal is back the way it was.
    assert termios.tcgetattr(t.slave) == t.saved


def test_shell_follows_the_window_size(terminal):
    t = terminal(rows=30, cols=100)
    t.send(b"stty size\n")
    t.expect(rb"(^|[\r\n])30 100\r?\n")

    set_winsize(t.master, 40, 132)
    os.kill(t.proc.pid, signal.SIGWINCH)
    # The resize travels asynchronously: ask until the new size shows.
    deadline = time.monotonic() + DEADLINE
    while True:
        t.send(b"stty size\n")
        m = t.expect(rb"(^|[\r\n])(\d+ \d+)\r?\n")
        if m.group(2) == b"40 132":
            break
        if time.monotonic() > deadline:
            pytest.fail(f"the shell still sees {m.group(2)!r}, not 40 132")
    t.send(b"exit\n")
    assert t.wait() == 0


def test_shell_restores_the_terminal_on_sigterm(terminal):
    t = terminal()
    t.send(b"echo ready$((1+1))\n")
    t.expect(rb"ready2")
    t.proc.send_signal(signal.SIGTERM)
    assert t.wait() == 128 + signal.SIGTERM
    assert termios.tcgetattr(t.slave) == t.saved


def test_shell_without_a_terminal(hangar, sandbox):
    r = hangar("sandbox", "shell", sandbox, input=b"echo $((6*7))\nexit 4\n")
    assert r.returncode == 4, r.stderr
    assert re.search(rb"(^|[\r\n])42\r?\n", r.stdout)


def test_shell_without_a_terminal_ends_at_end_of_input(hangar, sandbox):
    r = hangar("sandbox", "shell", sandbox, input=b"echo bye$((2+3))\n")
    assert r.returncode == 0, r.stderr
    assert b"bye5" in r.stdout
