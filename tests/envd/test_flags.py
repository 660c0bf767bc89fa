"""hangar-envd's command line and life cycle: what it refuses before it
serves (exit status 2 for a malformed command line, 1 for a set-up that
cannot work), how it tells its starter it is ready, and how it stops.
"""

import os
import platform
import re
import select
import signal
import socket
import subprocess
import time

import pytest

from conftest import envd_binary

DEADLINE = 10
# rt_sigtimedwait, where the daemon's main thread waits for a stop signal.
SIGWAIT_SYSCALL = {"x86_64": 128, "aarch64": 137}.get(platform.machine())


def run(args, pass_fds=()):
    env = {k: v for k, v in os.environ.items() if k != "HANGAR_ENVD_ACCESS_TOKEN"}
    return subprocess.run([envd_binary()] + args, pass_fds=pass_fds, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=DEADLINE, env=env)


def test_version_and_help_exit_0_on_stdout():
    for flag in ("-version", "--version"):
        r = run([flag])
        assert r.returncode == 0, r
        assert re.fullmatch(rb"\d+\.\d+\.\d+\n", r.stdout), r.stdout
        assert r.stderr == b""
    for flag in ("-h", "-help", "--help"):
        r = run([flag])
        assert r.returncode == 0, r
        assert r.stdout.startswith(b"usage: hangar-envd"), r.stdout
        assert r.stderr == b""


@pytest.mark.parametrize("args, says", [
    (["-nope"], b"unknown flag -nope"),
    (["--nope"], b"unknown flag --nope"),
    (["-port"], b"-port needs a value"),
    (["-addr", "127.0.0.1", "-user"], b"-user needs a value"),
    (["-port", "65536"], b"invalid -port 65536"),
    (["-port", "-1"], b"invalid -port -1"),
    (["-port", "80x"], b"invalid -port 80x"),
    (["-ready-fd", "-1"], b"invalid -ready-fd -1"),
    (["-ready-fd", "3x"], b"invalid -ready-fd 3x"),
    (["-listen-fd", ""], b"-listen-fd  is not a listening socket"),
    (["-listen-fd", "0"], b"-listen-fd 0 is not a listening socket"),
    (["-env", "NOEQUALS"], b"-env wants KEY=VALUE, got NOEQUALS"),
    (["-env", "=v"], b"-env wants KEY=VALUE, got =v"),
    (["-userns-fd", "-1", "-root-id", "5"], b"invalid -userns-fd -1"),
    (["-root-id", "0"], b"invalid -root-id 0"),
    (["-root-id", "4294967295"], b"invalid -root-id 4294967295"),
    (["-root-id", "7"], b"-userns-fd and -root-id go together"),
    (["-userns-fd", "0"], b"-userns-fd and -root-id go together"),
    (["-userns-fd", "0", "-root-id", "7"], b"-userns-fd 0 is not a user namespace below this one"),
])
def test_malformed_command_line_exits_2(args, says):
    r = run(["-addr", "127.0.0.1", "-port", "0"] + args)
    assert r.returncode == 2, r
    assert says in r.stderr, r.stderr
    assert r.stdout == b""


def test_unknown_flag_prints_usage_on_stderr():
    r = run(["-nope"])
    assert r.returncode == 2, r
    assert b"usage: hangar-envd" in r.stderr, r.stderr


def test_socket_and_listen_fd_exclude_each_other(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        r = run(["-socket", str(tmp_path / "s"), "-listen-fd", str(s.fileno())], pass_fds=(s.fileno(),))
    assert r.returncode == 2, r
    assert b"-socket and -listen-fd exclude each other" in r.stderr, r.stderr
    assert not (tmp_path / "s").exists()


def test_unknown_default_user_exits_1():
    r = run(["-addr", "127.0.0.1", "-port", "0", "-user", "nosuchuser-flags"])
    assert r.returncode == 1, r
    assert b"unknown user nosuchuser-flags" in r.stderr, r.stderr


def start(args, pass_fds=()):
    """The daemon with -ready-fd, once it said ready: (process, the ready line)."""
    rfd, wfd = os.pipe()
    env = {k: v for k, v in os.environ.items() if k != "HANGAR_ENVD_ACCESS_TOKEN"}
    try:
        proc = subprocess.Popen([envd_binary(), "-ready-fd", str(wfd)] + args, pass_fds=(wfd,) + tuple(pass_fds),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=env)
    finally:
        os.close(wfd)
    try:
        line = b""
        deadline = time.monotonic() + DEADLINE
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([rfd], [], [], left)[0]:
                proc.kill()
                proc.wait()
                pytest.fail("hangar-envd did not say ready")
            chunk = os.read(rfd, 64)
            if not chunk:
                proc.wait(timeout=DEADLINE)
                pytest.fail(f"hangar-envd exited ({proc.returncode}) before it was ready")
            line += chunk
    finally:
        os.close(rfd)
    return proc, line


def health(connect):
    """GET /health on a socket connect() returns: the status line."""
    with connect() as c:
        c.settimeout(DEADLINE)
        c.sendall(b"GET /health HTTP/1.1\r\nHost: envd\r\nConnection: close\r\n\r\n")
        data = b""
        while b"\r\n" not in data:
            chunk = c.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.split(b"\r\n", 1)[0]


def unix_connect(path):
    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        return s
    return connect


def poll(cond, what):
    deadline = time.monotonic() + DEADLINE
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {DEADLINE}s")
        time.sleep(0.02)


def pending_process_signals(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("ShdPnd:"):
                return int(line.split()[1], 16)
    return 0


def main_thread_syscall(pid):
    try:
        with open(f"/proc/{pid}/syscall") as f:
            return f.read().split()[0]
    except (FileNotFoundError, IndexError):
        return None


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("hangar-envd did not stop on SIGTERM")


def test_unix_socket_ready_line_hup_and_term(tmp_path):
    path = str(tmp_path / "envd.sock")
    proc, line = start(["-socket", path])
    try:
        assert line == b"ready\n"
        assert health(unix_connect(path)) == b"HTTP/1.1 204 No Content"
        if SIGWAIT_SYSCALL is not None:
            # SIGHUP is taken and ignored: the daemon goes back to waiting and still serves.
            want = str(SIGWAIT_SYSCALL)
            poll(lambda: main_thread_syscall(proc.pid) == want, "the daemon waiting for a signal")
            proc.send_signal(signal.SIGHUP)
            poll(lambda: not pending_process_signals(proc.pid) & (1 << (signal.SIGHUP - 1)),
                 "SIGHUP taken")
            assert proc.poll() is None
            assert health(unix_connect(path)) == b"HTTP/1.1 204 No Content"
            assert main_thread_syscall(proc.pid) == want
    finally:
        rc = stop(proc)
    assert rc == 0
    assert not os.path.exists(path), "the socket is removed on the way out"


def test_listen_fd_serves_on_the_inherited_socket():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc, line = start(["-listen-fd", str(s.fileno())], pass_fds=(s.fileno(),))
    try:
        assert line == b"ready\n"
        assert health(lambda: socket.create_connection(("127.0.0.1", port))) == b"HTTP/1.1 204 No Content"
    finally:
        assert stop(proc) == 0


def test_tcp_ready_line_names_the_bound_port():
    proc, line = start(["-addr", "127.0.0.1", "-port", "0"])
    try:
        m = re.fullmatch(rb"ready (\d+)\n", line)
        assert m, line
        port = int(m.group(1))
        assert port != 0
        assert health(lambda: socket.create_connection(("127.0.0.1", port))) == b"HTTP/1.1 204 No Content"
    finally:
        assert stop(proc) == 0
