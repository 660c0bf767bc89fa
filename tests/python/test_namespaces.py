"""sb.commands, sb.files and sb.pty: the E2B-shaped views, every method and its errors, on both providers."""

import secrets
import threading

import pytest

import hangar
from conftest import wait_for


def running(sb, pid):
    return sb.commands.run(f"kill -0 {pid}").exit_code == 0


# ---- commands -------------------------------------------------------------------------------


def test_run_returns_the_result_and_a_failure_is_not_raised(sandbox):
    r = sandbox.commands.run("echo $A; pwd; id -un; printf err >&2; exit 3", envs={"A": "set"}, cwd="/tmp",
                             user="root")
    assert isinstance(r, hangar.ExecResult)
    assert r.exit_code == 3 and r.stdout.text.splitlines() == ["set", "/tmp", "root"] and r.stderr == b"err"
    assert sandbox.commands.run("cat", stdin=b"fed").stdout == b"fed"


def test_run_timeout(sandbox):
    r = sandbox.commands.run("sleep 30", timeout=0.2)  # rounded up to a second, not to "no limit"
    assert r.timed_out and r.exit_code == 124
    for bad, exc in ((-1, ValueError), (float("nan"), ValueError), ("5", TypeError), (True, TypeError)):
        with pytest.raises(exc):
            sandbox.commands.run("true", timeout=bad)


def test_run_passes_text_live(sandbox):
    out, err = [], []
    # é is split between two writes: it reaches on_stdout whole; an invalid byte is U+FFFD.
    r = sandbox.commands.run("printf '\\303'; sleep 0.3; printf '\\251\\n'; printf 'x\\377y' >&2",
                             on_stdout=out.append, on_stderr=err.append)
    assert all(isinstance(t, str) for t in out + err)
    assert "".join(out) == "é\n" and "".join(err) == "x\ufffdy"
    assert r.stdout == "é\n".encode()
    # Only one of the two: the other stream is still kept in the result.
    r = sandbox.commands.run("echo a; echo b >&2", on_stderr=err.append)
    assert r.stdout == b"a\n" and err[-1] == "b\n"
    # An unfinished character at the very end is not lost.
    tail = []
    sandbox.commands.run("printf 'a\\303'", on_stdout=tail.append)
    assert "".join(tail) == "a\ufffd"


def test_run_callback_exception_stops_the_command(sandbox, scratch):
    class Stop(Exception):
        pass

    def boom(text):
        raise Stop(text)

    marker = f"{scratch}/ns-cb"
    with pytest.raises(Stop):
        sandbox.commands.run(f"echo $$ > {marker}; echo first; sleep 300", on_stdout=boom)
    pid = int(sandbox.files.read(marker))
    wait_for("the command to stop", lambda: not running(sandbox, pid))
    with pytest.raises(hangar.CanceledError):
        sandbox.commands.run("sleep 300", cancel=lambda: True)


def test_run_in_the_background_and_its_process(sandbox):
    got, done = [], threading.Event()

    def out(text):
        got.append(text)
        if "".join(got).endswith("bye\n"):
            done.set()

    p = sandbox.commands.run("read line; echo got $line; echo bye", background=True, stdin=b"", on_stdout=out)
    assert isinstance(p, hangar.Process) and p.pid > 0
    sandbox.commands.send_stdin(p.pid, "hello\n")
    assert p.wait(30) == 0 and done.wait(30)
    assert "".join(got) == "got hello\nbye\n"
    p.close()
    # stdin given: written, then kept open.
    p = sandbox.commands.run("head -c 6", background=True, stdin=b"abc")
    sandbox.commands.send_stdin(p.pid, b"def")
    assert p.wait(30) == 0
    p.close()
    with pytest.raises(ValueError, match="foreground"):
        sandbox.commands.run("sleep 300", background=True, cancel=lambda: True)


def test_connect_kill_and_their_errors(sandbox, scratch):
    p = sandbox.commands.run(f"echo $$ > {scratch}/ns-pid; while :; do echo tick; sleep 0.2; done", background=True)
    seen = []
    q = sandbox.commands.connect(p.pid, on_stdout=seen.append)
    wait_for("output through connect()", lambda: "tick\n" in "".join(seen))
    assert sandbox.commands.kill(p.pid) is True
    assert p.wait(30) == -1
    wait_for("the process to go", lambda: not running(sandbox, p.pid))
    assert sandbox.commands.kill(p.pid) is False
    q.close()
    p.close()
    with pytest.raises(hangar.NotFoundError):
        sandbox.commands.connect(999999)
    with pytest.raises(hangar.NotFoundError):
        sandbox.commands.send_stdin(999999, b"x")
    assert sandbox.commands.kill(999999) is False


# ---- files ----------------------------------------------------------------------------------


def test_read_and_write(sandbox):
    d = f"/tmp/ns-{secrets.token_hex(4)}"
    info = sandbox.files.write(f"{d}/a/t.txt", "héllo")
    assert isinstance(info, hangar.FileInfo) and info.path == f"{d}/a/t.txt" and info.bytes == 6 and info.is_file
    assert sandbox.files.read(f"{d}/a/t.txt") == "héllo"
    assert sandbox.files.read(f"{d}/a/t.txt", format="bytes") == "héllo".encode()
    sandbox.files.write(f"{d}/bin", b"\xff\x00")
    assert sandbox.files.read(f"{d}/bin", "bytes") == b"\xff\x00"
    with pytest.raises(UnicodeDecodeError):
        sandbox.files.read(f"{d}/bin")  # never replaced silently
    with pytest.raises(ValueError, match="format"):
        sandbox.files.read(f"{d}/bin", format="stream")
    with pytest.raises(hangar.FileError):
        sandbox.files.read(f"{d}/none")
    with pytest.raises(hangar.FileError):
        sandbox.files.write(f"{d}/bin/under-a-file", b"x")
    sandbox.files.remove(d)


def test_list_exists_remove_make_dir_rename_get_info(sandbox):
    d = f"/tmp/ns-{secrets.token_hex(4)}"
    assert sandbox.files.make_dir(f"{d}/sub") is True
    assert sandbox.files.make_dir(f"{d}/sub") is False  # already there
    sandbox.files.write(f"{d}/f", b"1")
    with pytest.raises(hangar.FileError):
        sandbox.files.make_dir(f"{d}/f")  # a file in the way is not "already there"
    entries = sandbox.files.list(d)
    assert isinstance(entries, list) and sorted(e.name for e in entries) == ["f", "sub"]
    assert [e.name for e in sandbox.files.list(d, depth=2) if e.name == "sub"] == ["sub"]
    with pytest.raises(hangar.FileError):
        sandbox.files.list(f"{d}/none")
    assert sandbox.files.exists(f"{d}/f") and not sandbox.files.exists(f"{d}/g")
    moved = sandbox.files.rename(f"{d}/f", f"{d}/new/g")
    assert moved.path == f"{d}/new/g" and moved.bytes == 1
    assert not sandbox.files.exists(f"{d}/f")
    with pytest.raises(hangar.FileError):
        sandbox.files.rename(f"{d}/f", f"{d}/h")
    assert sandbox.files.get_info(f"{d}/sub").is_dir
    with pytest.raises(hangar.FileError):
        sandbox.files.get_info(f"{d}/f")
    sandbox.files.remove(d)
    sandbox.files.remove(d)  # a missing path is not an error
    assert not sandbox.files.exists(d)


def test_watch_dir(sandbox):
    d = f"/tmp/ns-watch-{secrets.token_hex(4)}"
    sandbox.files.make_dir(f"{d}/deep")
    sandbox.files.write(f"{d}/keep", b"1")
    sandbox.files.write(f"{d}/gone", b"1")
    sandbox.files.write(f"{d}/mode", b"1")
    w = sandbox.files.watch_dir(d)
    assert w.get_new_events() == []
    sandbox.files.write(f"{d}/new", b"1")
    sandbox.files.write(f"{d}/keep", b"longer")
    sandbox.files.remove(f"{d}/gone")
    sandbox.commands.run(f"chmod 600 {d}/mode")
    sandbox.files.write(f"{d}/deep/below", b"1")  # not seen: one level only
    E = hangar.FilesystemEvent
    assert w.get_new_events() == [E("gone", hangar.EVENT_REMOVE), E("keep", hangar.EVENT_WRITE),
                                  E("mode", hangar.EVENT_CHMOD), E("new", hangar.EVENT_CREATE)]
    assert w.get_new_events() == []
    w.stop()
    with pytest.raises(ValueError):
        w.get_new_events()
    r = sandbox.files.watch_dir(d, recursive=True)
    sandbox.files.write(f"{d}/deep/more", b"1")
    assert r.get_new_events() == [E("deep/more", hangar.EVENT_CREATE)]
    with pytest.raises(hangar.FileError):
        sandbox.files.watch_dir(f"{d}/none")
    sandbox.files.remove(d)
    with pytest.raises(hangar.FileError):
        r.get_new_events()


# ---- pty ------------------------------------------------------------------------------------


def test_pty(sandbox):
    got, lock = [], threading.Lock()

    def data(b):
        assert isinstance(b, bytes)
        with lock:
            got.append(b)

    def seen():
        with lock:
            return b"".join(got)

    with pytest.raises(TypeError, match="PtySize"):
        sandbox.pty.create((30, 90))
    t = sandbox.pty.create(hangar.PtySize(rows=30, cols=90), on_data=data)
    assert isinstance(t, hangar.Process)
    sandbox.pty.send_stdin(t.pid, "stty size\n")
    wait_for("the size", lambda: b"30 90" in seen())
    sandbox.pty.resize(t.pid, hangar.PtySize(rows=40, cols=100))
    sandbox.pty.send_stdin(t, "stty size\n")  # the Process itself works too
    wait_for("the new size", lambda: b"40 100" in seen())
    with pytest.raises(TypeError, match="PtySize"):
        sandbox.pty.resize(t, (41, 101))
    sandbox.pty.resize(t, hangar.PtySize(rows=41, cols=101))
    sandbox.pty.send_stdin(t, "stty size\n")
    wait_for("the newer size", lambda: b"41 101" in seen())
    assert sandbox.pty.kill(t.pid) is True
    assert t.wait(30) == -1
    assert sandbox.pty.kill(t) is False
    with pytest.raises(hangar.NotFoundError):
        sandbox.pty.send_stdin(999999, "x")
    with pytest.raises(hangar.NotFoundError):
        sandbox.pty.resize(999999, hangar.PtySize(1, 1))
    t.close()


# ---- a dead sandbox -------------------------------------------------------------------------


def test_every_view_raises_gone_on_a_dead_sandbox(target):
    ctx, provider = target
    sb = hangar.Sandbox.create(ctx, provider=provider)
    sb.kill()
    calls = [
        lambda: sb.commands.run("true"),
        lambda: sb.commands.run("true", background=True),
        lambda: sb.files.read("/tmp/x"),
        lambda: sb.files.write("/tmp/x", b"1"),
        lambda: sb.files.list("/tmp"),
        lambda: sb.files.exists("/tmp"),
        lambda: sb.files.make_dir("/tmp/y"),
        lambda: sb.files.watch_dir("/tmp"),
        lambda: sb.pty.create(),
    ]
    for call in calls:
        with pytest.raises(hangar.GoneError):
            call()
    sb.close()
