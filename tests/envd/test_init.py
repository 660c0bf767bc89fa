"""hangar-envd-init, a local sandbox's pid 1 (programs/hangar-envd/init_main.c).

It starts its arguments as its only child, reaps every child it is given,
ends with its first child's status, and keeps none of the descriptors it
handed on. Run here outside a namespace, where the same code paths hold.
"""

import os
import signal
import subprocess
import time

from conftest import envd_binary


def init_binary():
    return os.path.join(os.path.dirname(envd_binary()), "hangar-envd-init")


def needed(path):
    out = subprocess.run(["readelf", "-dW", path], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if "(NEEDED)" in line]


def test_static_beside_the_daemon():
    assert os.access(init_binary(), os.X_OK), init_binary()
    assert needed(init_binary()) == [], "it must load no library: images may lack them"


def test_exit_status_is_its_childs():
    assert subprocess.run([init_binary(), "/bin/sh", "-c", "exit 7"]).returncode == 7
    assert subprocess.run([init_binary(), "/bin/sh", "-c", "kill -TERM $$"]).returncode == 128 + signal.SIGTERM


def test_refuses_a_bad_command_line():
    r = subprocess.run([init_binary()], capture_output=True, text=True)
    assert r.returncode == 2 and "usage" in r.stderr
    r = subprocess.run([init_binary(), "sh"], capture_output=True, text=True)
    assert r.returncode == 2, "a relative program is refused: PATH is not searched"
    r = subprocess.run([init_binary(), "/nonexistent/program"], capture_output=True, text=True)
    assert r.returncode == 127 and "/nonexistent/program" in r.stderr


def test_keeps_no_descriptor_it_handed_on():
    r, w = os.pipe()
    # The first child holds the pipe's write end (as envd holds its socket
    # and pipes); init itself must keep none of it.
    p = subprocess.Popen([init_binary(), "/bin/sh", "-c", "read x"], stdin=subprocess.PIPE, pass_fds=(w,))
    os.close(w)
    deadline = time.monotonic() + 10
    fds = None
    while time.monotonic() < deadline:
        fds = sorted(int(f) for f in os.listdir(f"/proc/{p.pid}/fd"))
        if fds == [0, 1, 2]:
            break
        time.sleep(0.02)
    assert fds == [0, 1, 2], f"init still holds {fds}"
    p.communicate(b"\n", timeout=10)
    assert p.returncode == 0
    # Both gone: nothing holds the write end any more.
    assert os.read(r, 1) == b""
    os.close(r)


def test_an_orphan_is_reaped_not_taken_for_its_first_child():
    # An orphan that ends first (exit 3) while the first child lives on
    # (exit 5): init, a subreaper here as it is pid 1 in a sandbox, reaps
    # the orphan and still ends with the first child's status.
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    script = "(sh -c 'exit 3' &); sleep 1; exit 5"
    r = subprocess.run([init_binary(), "/bin/sh", "-c", script],
                       preexec_fn=lambda: libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
    assert r.returncode == 5
