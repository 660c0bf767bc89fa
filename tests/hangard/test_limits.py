"""hangard fits its connection limit whatever soft file limit it starts with."""

import resource
import socket

import pytest

from conftest import wait_for


def test_a_low_soft_file_limit_is_raised_to_fit_the_connections(make_server):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 300
    if hard != resource.RLIM_INFINITY and hard < want + 300:
        pytest.skip(f"the hard file limit ({hard}) is too low to show it")
    s = make_server(args=["-max-connections", str(want), "-idle-timeout-seconds", "120"])
    # hangard starts with 64 files: without raising it, it could not accept
    # more than some 50 connections.
    s.preexec = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    s.start()
    with open(f"/proc/{s.proc.pid}/limits") as f:
        line = next(l for l in f if l.startswith("Max open files"))
    assert int(line.split()[3]) >= want, line

    held = []
    try:
        for _ in range(want - 20):
            c = socket.create_connection(("127.0.0.1", s.port), timeout=30)
            held.append(c)
        # Every one of them, all open together, gets its answer.
        for c in held:
            c.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
        answered = 0
        for c in held:
            got = b""
            while b"\r\n\r\n" not in got:
                d = c.recv(4096)
                if not d:
                    break
                got += d
            answered += got.startswith(b"HTTP/1.1 200")
        assert answered == len(held)
    finally:
        for c in held:
            c.close()
    assert not [l for l in s.log_lines() if l.get("msg") == "the file limit is below HANGARD_MAX_CONNECTIONS"]
    wait_for("hangard still answers", lambda: s.request("GET", "/livez", token=None).status == 200)


def test_a_hard_file_limit_too_low_is_logged(make_server):
    s = make_server(args=["-max-connections", "5000"])
    # Only the child's limits change (a hard limit, once lowered, stays so).
    s.preexec = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 512))
    s.start()
    got = [l for l in s.log_lines() if l.get("msg") == "the file limit is below HANGARD_MAX_CONNECTIONS"]
    assert got and got[0]["limit"] == 512 and got[0]["max_connections"] == 5000, got
    assert s.request("GET", "/livez", token=None).status == 200
