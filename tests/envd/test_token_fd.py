"""-token-fd: the access token comes from an inherited pipe, never from a file."""

import base64
import os
import secrets
import subprocess

import pytest

from conftest import Daemon, envd_binary
from envdwire import events


def pipe_with(data):
    """The read end of a pipe holding data, its write end already closed."""
    rfd, wfd = os.pipe()
    os.write(wfd, data)
    os.close(wfd)
    return rfd


@pytest.fixture
def fd_daemon():
    daemons = []

    def start(data, token):
        rfd = pipe_with(data)
        try:
            d = Daemon(["-token-fd", str(rfd)], token=token, pass_fds=(rfd,))
            d.token_pipe = f"pipe:[{os.fstat(rfd).st_ino}]"
        finally:
            os.close(rfd)
        daemons.append(d)
        return d

    yield start
    problems = [m for m in (d.check_healthy() for d in daemons) if m]
    for d in daemons:
        d.kill()
    if problems:
        pytest.fail("\n".join(problems))


def test_token_from_fd(fd_daemon):
    tok = secrets.token_hex(32)
    d = fd_daemon((tok + "\n").encode(), tok)
    assert d.client.unary("/process.Process/List", {}, token=None).status == 401
    assert d.client.unary("/process.Process/List", {}, token="wrong").status == 401
    assert d.client.unary("/process.Process/List", {}).status == 200
    # The descriptor is closed once read: no child can inherit it.
    fds = f"/proc/{d.proc.pid}/fd"
    links = []
    for n in os.listdir(fds):
        try:
            links.append(os.readlink(os.path.join(fds, n)))
        except FileNotFoundError:
            pass  # a connection closed meanwhile
    assert d.token_pipe not in links, links


def test_token_fd_wins_over_env_and_env_is_consumed(tmp_path):
    tok = secrets.token_hex(32)
    rfd = pipe_with(tok.encode())
    env = dict(os.environ, HANGAR_ENVD_ACCESS_TOKEN="from-the-environment")
    try:
        d = Daemon(["-token-fd", str(rfd)], token=tok, pass_fds=(rfd,), env=env)
    finally:
        os.close(rfd)
    try:
        c = d.client
        assert c.unary("/process.Process/List", {}, token="from-the-environment").status == 401
        assert c.unary("/process.Process/List", {}).status == 200
        status, envs, _ = c.stream("/process.Process/Start",
                                   {"process": {"cmd": "/bin/sh", "args": ["-c", "env; ls /proc/self/fd"]}})
        assert status == 200
        out = b"".join(base64.b64decode(b["stdout"]) for k, b in events(envs) if k == "data" and "stdout" in b)
        assert b"PATH=" in out, out
        assert b"HANGAR_ENVD_ACCESS_TOKEN" not in out, out
        assert tok.encode() not in out
    finally:
        d.kill()


def run_refused(args, pass_fds=()):
    return subprocess.run([envd_binary(), "-addr", "127.0.0.1", "-port", "0"] + args, pass_fds=pass_fds,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=10)


@pytest.mark.parametrize("data", [b"", b"\n", b"x" * 1025])
def test_bad_token_fd_refused_at_start(data):
    rfd = pipe_with(data)
    try:
        r = run_refused(["-token-fd", str(rfd)], pass_fds=(rfd,))
    finally:
        os.close(rfd)
    assert r.returncode == 1, r
    assert b"token" in r.stderr, r.stderr


def test_token_fd_not_open_refused():
    r = run_refused(["-token-fd", "97"])
    assert r.returncode == 1, r


def test_token_fd_and_file_exclude_each_other(tmp_path):
    p = tmp_path / "tok"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"a" * 64)
    os.close(fd)
    rfd = pipe_with(b"b" * 64)
    try:
        r = run_refused(["-token-fd", str(rfd), "-token-file", str(p)], pass_fds=(rfd,))
    finally:
        os.close(rfd)
    assert r.returncode == 2, r
    assert b"exclude" in r.stderr, r.stderr


@pytest.mark.parametrize("bad", ["", "-1", "3x"])
def test_token_fd_malformed(bad):
    r = run_refused(["-token-fd", bad])
    assert r.returncode == 2, r
