"""Sessions and checkpoints from Python, on local sandboxes and the e2b fake."""

import os
import shutil
import subprocess
import tempfile

import pytest

import hangar


@pytest.fixture
def ws(target):
    """The workspace: /workspace in a local sandbox; on the fake, whose
    sandboxes share the host's files, a directory of the test's own that
    the sandbox's user may create."""
    if target[1] == "local":
        yield "/workspace"
        return
    d = tempfile.mkdtemp(prefix="hangar-py-ws-", dir="/tmp")
    os.chmod(d, 0o777)
    yield d + "/ws"
    shutil.rmtree(d, ignore_errors=True)


def test_checkpoint_create_restore_and_blob(target, ws, tmp_path):
    ctx, provider = target
    with hangar.Sandbox.create(ctx, provider=provider) as sb:
        sb.exec(f"mkdir -p {ws}/sub")
        sb.write_file(f"{ws}/a.txt", b"alpha")
        sb.write_file(f"{ws}/sub/b.bin", bytes(range(256)))
        seen = []
        cp = hangar.Checkpoint.create(sb, workspace=ws, blob=b"conversation", labels={"agent": "py"},
                                      session_id="py-sess", progress=lambda done, total: seen.append(done))
        assert cp.id.startswith("ckpt-") and seen
        info = cp.info()
        assert info.session_id == "py-sess" and info.labels == {"agent": "py"} and info.files == 2
        assert info.blob_bytes == len(b"conversation")
        assert cp.read_blob() == b"conversation"
        assert cp.id in [c.id for c in hangar.Checkpoint.list(ctx, "py-sess")]
        assert hangar.Checkpoint.lookup(ctx, cp.id).info().content_hash == info.content_hash
        sb.write_file(f"{ws}/a.txt", b"changed")
        sb.remove(f"{ws}/sub")
        cp.restore(sb)
        assert sb.read_file(f"{ws}/a.txt") == b"alpha"
        assert sb.read_file(f"{ws}/sub/b.bin") == bytes(range(256))
        out = tmp_path / "cp.tar.zst"
        cp.export(out)
        listing = subprocess.run(["tar", "--zstd", "-tf", str(out)], capture_output=True, check=True).stdout
        assert b"a.txt" in listing and b"sub/b.bin" in listing

        class Enough(Exception):
            pass

        def stop(done, total):
            raise Enough()

        with pytest.raises(Enough):
            hangar.Checkpoint.create(sb, workspace=ws, progress=stop)
        with pytest.raises(hangar.CanceledError):
            hangar.Checkpoint.create(sb, workspace=ws, progress=lambda done, total: True)
        cp.delete()
        with pytest.raises(hangar.NotFoundError):
            hangar.Checkpoint.lookup(ctx, cp.id)


def test_session_suspend_resume(target, ws):
    ctx, provider = target
    s = hangar.Session.create(ctx, provider=provider, labels=["agent=py"], workspace=ws)
    try:
        sb = s.sandbox()
        sb.exec(f"mkdir -p {ws}")
        sb.write_file(f"{ws}/state", b"turn 1")
        info = s.info()
        assert info.state == hangar.SESSION_ACTIVE and info.labels == {"agent": "py"}
        assert info.sandbox_id == sb.id
        assert s.id in [i.id for i in hangar.Session.list(ctx)]
        s.suspend(blob=b"chat so far")
        after = s.info()
        assert after.state in (hangar.SESSION_PARKED, hangar.SESSION_SUSPENDED)
        assert hangar.Checkpoint.lookup(ctx, after.checkpoint_id).read_blob() == b"chat so far"
        again = hangar.Session.open(ctx, s.id)
        sb2 = again.resume()
        assert again.info().state == hangar.SESSION_ACTIVE
        assert again.info().last_resume in (hangar.RESUME_HOT, hangar.RESUME_COLD)
        assert sb2.read_file(f"{ws}/state") == b"turn 1"
        s.suspend(park=False)
        assert s.info().state == hangar.SESSION_SUSPENDED
        sb3 = s.resume()
        assert s.info().last_resume == hangar.RESUME_COLD
        assert sb3.read_file(f"{ws}/state") == b"turn 1"
        s.archive()
        with pytest.raises(hangar.GoneError):
            s.resume()
    finally:
        s.delete()
    with pytest.raises(hangar.NotFoundError):
        s.info()


def test_session_fork_and_keep(cloud_ctx):
    d = tempfile.mkdtemp(prefix="hangar-py-ws-", dir="/tmp")
    os.chmod(d, 0o777)
    ws = d + "/ws"
    s = hangar.Session.create(cloud_ctx, provider="e2b", workspace=ws)
    try:
        s.sandbox().exec(f"mkdir -p {ws}")
        s.sandbox().write_file(f"{ws}/f", b"base")
        forks = s.fork(2)
        assert len(forks) == 2 and all(f.error is None and f.session is not None for f in forks)
        assert all(f.method in (hangar.FORK_NATIVE, hangar.FORK_SNAPSHOT, hangar.FORK_CHECKPOINT) for f in forks)
        kept = forks[0].session
        assert kept.sandbox().read_file(f"{ws}/f") == b"base"
        assert kept.info().parent_id == s.id
        assert kept.keep() == 1
        assert forks[1].session.info().state == hangar.SESSION_ARCHIVED
        for f in forks:
            f.session.delete()
    finally:
        s.delete()
        shutil.rmtree(d, ignore_errors=True)


def test_session_fork_cancelled_keeps_nothing(ctx):
    s = hangar.Session.create(ctx, workspace="/workspace")
    try:
        s.sandbox().write_file("/workspace/f", b"base")
        sessions = sorted(i.id for i in hangar.Session.list(ctx))
        checkpoints = [c.id for c in hangar.Checkpoint.list(ctx, session_id=s.id)]
        asked = []

        def cancel():
            # Asked once before the snapshot, then while the children are made
            # and once more after: "yes" from the second ask on comes once the
            # fork is under way, however fast the children are.
            asked.append(1)
            return len(asked) > 1

        with pytest.raises(hangar.CanceledError):
            s.fork(2, cancel=cancel)
        assert len(asked) >= 2
        assert sorted(i.id for i in hangar.Session.list(ctx)) == sessions
        assert [c.id for c in hangar.Checkpoint.list(ctx, session_id=s.id)] == checkpoints
        assert s.info().state == hangar.SESSION_ACTIVE
        # A cancel that raises gives the fork up too, and the error is the caller's.
        def boom():
            raise KeyError("stop")
        with pytest.raises(KeyError):
            s.fork(1, cancel=boom)
        assert sorted(i.id for i in hangar.Session.list(ctx)) == sessions
        forks = s.fork(1, cancel=lambda: False)
        assert len(forks) == 1 and forks[0].session is not None
        forks[0].session.delete()
    finally:
        s.delete()


def test_session_hooks(ctx):
    calls = []

    def hook(session, sandbox, kind):
        calls.append((session.id, sandbox.id, kind))
        return kind != hangar.HOOK_PARK

    ctx.set_session_hook(hook)
    s = hangar.Session.create(ctx)
    try:
        sid = s.sandbox().id
        s.suspend()
        # The park hook refused: the sandbox was destroyed, not parked.
        assert (s.id, sid, hangar.HOOK_PARK) in calls
        assert s.info().state == hangar.SESSION_SUSPENDED
        s.resume()
        assert calls[-1][2] == hangar.HOOK_COLD

        def bad(session, sandbox, kind):
            raise ValueError("hook " + str(kind))

        ctx.set_session_hook(bad)
        with pytest.raises(ValueError, match="hook"):
            s.suspend()
    finally:
        ctx.set_session_hook(None)
        s.delete()
