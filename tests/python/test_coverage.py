"""The parts of the API no other test reaches, each by what it does.

Filesystem pauses, lifetimes, the reaper, a process's pending exception,
provider capabilities, copy_out's options, checkpoint selection, path and
merge, exclusive-credential sessions, and a context that ignores the
environment.
"""

import json
import os
import secrets
import signal
import threading
import time
import urllib.request

import pytest

import hangar
from conftest import wait_for


def fake_sandbox(fake, sid):
    """The fake's own record of a sandbox (its envd's pid among the rest)."""
    with urllib.request.urlopen(fake.api + "/_fake/sandboxes", timeout=10) as r:
        return next(s for s in json.load(r) if s["id"] == sid)


def gone(sb):
    try:
        sb.exec("true")
    except hangar.GoneError:
        return True
    return False


# ---- capabilities and filesystem pauses ----------------------------------------------------


def test_provider_capabilities(target):
    ctx, provider = target
    info = ctx.provider(provider)
    assert info.name == provider
    assert info in list(ctx.providers())
    bits = [getattr(hangar, n) for n in hangar.__all__ if n.startswith("CAP_")]
    # has() answers from the bits and nothing else; no bit is outside the known ones.
    assert info.capabilities == sum(b for b in bits if info.has(b))
    assert info.has(hangar.CAP_PAUSE) and info.has(hangar.CAP_PTY)
    cloud_only = (hangar.CAP_KERNEL_ISOLATION, hangar.CAP_FS_PAUSE, hangar.CAP_FORK)
    for cap in cloud_only:
        # Local sandboxes share the host's kernel and keep their memory when paused.
        assert info.has(cap) == (provider == "e2b"), (provider, cap)
    # Local snapshots (of files) are a root caller's.
    assert info.has(hangar.CAP_SNAPSHOT) == (provider == "e2b" or os.geteuid() == 0), provider


def test_local_snapshot_and_its_deletion():
    if os.geteuid() != 0:
        pytest.skip("local snapshots need a root caller")
    ctx = hangar.Context()
    with hangar.Sandbox.create(ctx, provider="local", network=False) as sb:
        sb.write_file("/workspace/kept", b"kept")
        sid = sb.snapshot("py")
    with hangar.Sandbox.create(ctx, provider="local", template=sid, network=False) as child:
        assert child.read_file("/workspace/kept") == b"kept"
        with pytest.raises(hangar.BusyError):
            ctx.delete_snapshot(sid, "local")
    ctx.delete_snapshot(sid, "local")
    with pytest.raises(hangar.GoneError):
        ctx.delete_snapshot(sid, "local")


def test_pause_filesystem_keeps_files_not_processes(cloud_ctx):
    assert cloud_ctx.provider("e2b").has(hangar.CAP_FS_PAUSE)
    path = f"/tmp/hangar-py-fspause-{secrets.token_hex(6)}/kept"
    with hangar.Sandbox.create(cloud_ctx, provider="e2b") as sb:
        sb.write_file(path, b"kept")
        # A memory pause keeps the process ...
        p = sb.start("sleep 300")
        sb.pause()
        sb.resume()
        hangar.Process.attach(sb, p.pid).close()
        # ... a filesystem pause does not: the sandbox boots afresh on its files.
        sb.pause_filesystem()
        assert sb.info().paused
        with pytest.raises(hangar.PausedError):
            sb.exec("true")
        sb.resume()
        assert not sb.info().paused
        assert sb.read_file(path) == b"kept"
        with pytest.raises(hangar.NotFoundError):
            hangar.Process.attach(sb, p.pid)
        p.close()
        sb.exec(f"rm -rf {os.path.dirname(path)}; kill {p.pid} 2>/dev/null; true")


def test_pause_filesystem_where_unsupported(ctx):
    assert not ctx.provider("local").has(hangar.CAP_FS_PAUSE)
    with hangar.Sandbox.create(ctx) as sb:
        p = sb.start("sleep 300")
        with pytest.raises(hangar.UnsupportedError):
            sb.pause_filesystem()
        # Never another kind of pause instead: it runs on, its process too.
        assert not sb.info().paused
        assert sb.exec("echo on").stdout == b"on\n"
        hangar.Process.attach(sb, p.pid).close()
        p.kill()


# ---- lifetimes ------------------------------------------------------------------------------


def test_set_timeout(target):
    ctx, provider = target
    with hangar.Sandbox.create(ctx, provider=provider, timeout=300) as sb:
        sb.set_timeout(3600)
        left = sb.info().expires_at_us / 1e6 - time.time()
        assert 3500 < left <= 3601, left
        # It may shorten the lifetime: when that runs out, the provider kills it.
        sb.set_timeout(2)
        assert sb.info().expires_at_us / 1e6 - time.time() <= 3
        wait_for("the sandbox to expire", lambda: gone(sb), timeout=60, interval=0.2)
        with pytest.raises(hangar.GoneError):
            sb.set_timeout(60)


def test_set_timeout_zero_is_no_limit(ctx):
    with hangar.Sandbox.create(ctx, timeout=300) as sb:
        assert sb.info().expires_at_us > 0
        sb.set_timeout(0)
        assert sb.info().expires_at_us == 0
        with pytest.raises(hangar.InvalidArgumentError):
            sb.set_timeout(-1)


# ---- the reaper and exclusive credentials --------------------------------------------------------


def test_reap_destroys_sandboxes_parked_too_long(ctx):
    s = hangar.Session.create(ctx)
    try:
        sid = s.sandbox().id
        s.suspend()
        assert s.info().state == hangar.SESSION_PARKED
        # Within HANGAR_SESSION_HOT_RESUME_MINUTES (a day by default) it stays parked.
        ctx.reap()
        assert s.info().state == hangar.SESSION_PARKED
        ctx.set("HANGAR_SESSION_HOT_RESUME_MINUTES", "0")
        assert ctx.reap() >= 1
        info = s.info()
        assert info.state == hangar.SESSION_SUSPENDED and info.parked_since_us == 0
        with pytest.raises(hangar.GoneError):
            hangar.Sandbox.attach(ctx, sid)
        # The checkpoint is kept: the session comes back cold.
        s.resume()
        assert s.info().last_resume == hangar.RESUME_COLD
    finally:
        s.delete()


def test_exclusive_credential_sessions_are_never_parked(ctx):
    flag = hangar._hangar.HANGAR_SESSION_EXCLUSIVE_CREDENTIAL
    plain = hangar.Session.create(ctx)
    s = hangar.Session.create(ctx, exclusive_credential=True)
    try:
        assert s.info().flags & flag and not plain.info().flags & flag
        sid = s.sandbox().id
        s.sandbox().write_file("/workspace/note", b"turn 1")
        plain.suspend()
        s.suspend()
        assert plain.info().state == hangar.SESSION_PARKED
        # Destroyed, not parked, though parking was allowed and worked for the other.
        assert s.info().state == hangar.SESSION_SUSPENDED
        with pytest.raises(hangar.GoneError):
            hangar.Sandbox.attach(ctx, sid)
        sb = s.resume()
        assert sb.id != sid and s.info().last_resume == hangar.RESUME_COLD
        assert sb.read_file("/workspace/note") == b"turn 1"
    finally:
        s.delete()
        plain.delete()


# ---- processes ------------------------------------------------------------------------------


def test_process_check_raises_what_on_output_raised(sandbox):
    quiet = sandbox.start("echo fine", on_output=lambda stream, data: None)
    assert quiet.wait(30) == 0
    quiet.check()  # nothing was raised: nothing to raise
    quiet.close()

    def out(stream, data):
        raise KeyError("from on_output")

    p = sandbox.start("echo one; sleep 300", on_output=out)
    try:
        def raised():
            try:
                p.check()
            except KeyError as e:
                assert "from on_output" in str(e)
                return True
            return False

        # Raised by check() while the process still runs, without a wait().
        wait_for("on_output's exception", raised)
        # Once: it is not raised again, by check() or by wait().
        p.check()
        p.kill()
        assert p.wait(30) == -1
    finally:
        p.close()


# ---- copy_out's options -------------------------------------------------------------------


def test_copy_out_limit(sandbox, scratch, tmp_path):
    data = secrets.token_bytes(1000)
    sandbox.write_file(f"{scratch}/limit.bin", data)
    with pytest.raises(hangar.TooLargeError):
        sandbox.copy_out(f"{scratch}/limit.bin", tmp_path / "small", limit=999)
    assert os.listdir(tmp_path) == []  # neither the file nor its temporary
    sandbox.copy_out(f"{scratch}/limit.bin", tmp_path / "exact", limit=1000)
    assert (tmp_path / "exact").read_bytes() == data
    with pytest.raises(hangar.InvalidArgumentError):
        sandbox.copy_out(f"{scratch}/limit.bin", tmp_path / "x", timeout=86401)


def test_copy_out_timeout_and_cancel(fake, tmp_path):
    # The sandbox's envd is stopped, so the copy gets no answer: the
    # request timeout (30 s here) would bound that silence; timeout= and
    # cancel= end it first.
    ctx = hangar.Context(settings=dict(fake.settings, HANGAR_REQUEST_TIMEOUT_SECONDS="30"))
    with hangar.Sandbox.create(ctx, provider="e2b") as sb:
        sb.write_file("/tmp/hangar-py-stall", b"abc")
        pid = fake_sandbox(fake, sb.id)["envd_pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            with pytest.raises(hangar.DeadlineError) as ei:
                sb.copy_out("/tmp/hangar-py-stall", tmp_path / "t", timeout=1)
            assert 0.9 < time.monotonic() - t0 < 15
            assert "within 1 s" in ei.value.message
            polls = []

            def cancel():
                polls.append(time.monotonic())
                return len(polls) >= 3

            with pytest.raises(hangar.CanceledError):
                sb.copy_out("/tmp/hangar-py-stall", tmp_path / "c", cancel=cancel)
            assert len(polls) == 3  # polled until it said stop, then never again
            assert os.listdir(tmp_path) == []
        finally:
            os.kill(pid, signal.SIGCONT)
        sb.copy_out("/tmp/hangar-py-stall", tmp_path / "ok", timeout=10, cancel=lambda: False)
        assert (tmp_path / "ok").read_bytes() == b"abc"
        sb.remove("/tmp/hangar-py-stall")


# ---- checkpoints: selection, path, merge --------------------------------------------------------


def test_checkpoint_select_all_native_and_merge():
    lines = []
    lock = threading.Lock()

    def on_log(level, msg):
        with lock:
            lines.append(msg)

    ctx = hangar.Context(on_log=on_log)
    ws = "/workspace"
    with hangar.Sandbox.create(ctx) as sb:
        r = sb.exec(f"cd {ws} && git init -q && printf 'deps/\\n' > .gitignore && mkdir deps && echo dep > deps/d"
                    " && echo src > src && git add -A && git -c user.name=t -c user.email=t@t commit -qm one")
        assert r.ok, r.stderr.text
        auto = hangar.Checkpoint.create(sb, workspace=ws)
        full = hangar.Checkpoint.create(sb, workspace=ws, select_all=True, native=False)
        try:
            # AUTO keeps a repository's files that git does not ignore; ALL keeps everything.
            assert auto.info().selection == "git" and full.info().selection == "all"
            assert full.info().files == auto.info().files + 1  # deps/d (directories do not count)
            # native=False took GNU tar in the sandbox instead of hangar-envd's endpoint.
            with lock:
                said = list(lines)
            assert any(auto.id in m and "(native path)" in m for m in said), said
            assert any(full.id in m and "(tar path)" in m for m in said), said

            # A restore replaces the workspace's contents ...
            sb.write_file(f"{ws}/since", b"new")
            full.restore(sb)
            assert not sb.exists(f"{ws}/since")
            # ... or, with merge=True, adds to them.
            sb.write_file(f"{ws}/since", b"new")
            sb.write_file(f"{ws}/src", b"changed")
            sb.remove(f"{ws}/deps")
            full.restore(sb, merge=True)
            assert sb.read_file(f"{ws}/since") == b"new"
            assert sb.read_file(f"{ws}/src") == b"src\n"
            assert sb.read_file(f"{ws}/deps/d") == b"dep\n"
            # AUTO left the ignored directory out: restored alone, it is not there.
            sb.remove(f"{ws}/deps")
            auto.restore(sb)
            assert not sb.exists(f"{ws}/deps") and sb.read_file(f"{ws}/src") == b"src\n"
        finally:
            auto.delete()
            full.delete()


# ---- contexts ---------------------------------------------------------------------------------


def test_context_without_the_environment(monkeypatch):
    state = {"HANGAR_STATE_DIR": os.environ["HANGAR_STATE_DIR"]}
    default = hangar.Context(settings=state, use_environment=False).get("HANGAR_EXEC_TIMEOUT_SECONDS")
    monkeypatch.setenv("HANGAR_EXEC_TIMEOUT_SECONDS", "77")
    assert default != "77"
    read = hangar.Context()
    assert read.get("HANGAR_EXEC_TIMEOUT_SECONDS") == "77"
    src = {s.name: s.source for s in read.settings()}
    assert src["HANGAR_EXEC_TIMEOUT_SECONDS"] == hangar.SETTING_ENVIRONMENT
    ignored = hangar.Context(settings=state, use_environment=False)
    assert ignored.get("HANGAR_EXEC_TIMEOUT_SECONDS") == default
    src = {s.name: s.source for s in ignored.settings()}
    assert src["HANGAR_EXEC_TIMEOUT_SECONDS"] == hangar.SETTING_DEFAULT
    assert src["HANGAR_STATE_DIR"] == hangar.SETTING_EXPLICIT
    # A wrong value in the environment fails the context that reads it, naming
    # the variable, and only that one.
    monkeypatch.setenv("HANGAR_EXEC_TIMEOUT_SECONDS", "soon")
    with pytest.raises(hangar.ConfigError, match="HANGAR_EXEC_TIMEOUT_SECONDS"):
        hangar.Context()
    assert hangar.Context(settings=state, use_environment=False).get("HANGAR_EXEC_TIMEOUT_SECONDS") == default
