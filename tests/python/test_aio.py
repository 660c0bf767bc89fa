"""hangar.aio: many sandboxes from one event loop, and cancellation that reaches the sandbox."""

import asyncio
import contextlib
import gc
import os
import secrets
import threading
import time

import pytest

import hangar
from hangar.aio import AsyncCheckpoint, AsyncSandbox, AsyncSession
from conftest import scratch_path

DEADLINE = 120


def run(coro):
    return asyncio.run(coro)


async def eventually(what, cond, timeout=30.0):
    """Awaits cond() (a coroutine function) until it is true or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        v = await cond()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def alive(sb, pid):
    return (await sb.commands.run(f"kill -0 {pid}")).exit_code == 0


def local_sandboxes(ctx):
    return {s.id for s in ctx.sandboxes("local")}


def idle(sb):
    """No call is running on the handle."""
    return sb.sync._handle._busy == 0


@contextlib.asynccontextmanager
async def removed_after(sb, path):
    """Yields path; removes it through sb at the end (the fake's sandboxes write the host's /tmp)."""
    try:
        yield path
    finally:
        await sb.files.remove(path)


@pytest.fixture
def async_target(target):
    return target


def test_create_run_and_the_async_with_block(async_target):
    ctx, provider = async_target

    async def main():
        sb = await AsyncSandbox.create(ctx, provider=provider)
        async with sb, removed_after(sb, scratch_path("aio")) as d:
            assert sb.provider == provider and sb.sandbox_id == sb.id
            r = await sb.commands.run("echo hi; exit 4")
            assert r.exit_code == 4 and r.stdout == b"hi\n"
            await sb.files.write(f"{d}/aio.txt", "text")
            assert await sb.files.read(f"{d}/aio.txt") == "text"
            assert await sb.files.read(f"{d}/aio.txt", format="bytes") == b"text"
            assert (await sb.exec(f"cat {d}/aio.txt")).stdout == b"text"
            assert [e.name for e in await sb.files.list(d) if e.name == "aio.txt"] == ["aio.txt"]
            assert (await sb.info()).id == sb.id
            with pytest.raises(hangar.FileError):
                await sb.files.read("/tmp/none")
        with pytest.raises(hangar.GoneError):
            await AsyncSandbox.attach(ctx, sb.id)
        # `async with await AsyncSandbox.create()` and the default context.
        async with await AsyncSandbox.create() as d:
            assert d.context is hangar.default_context()
            again = await AsyncSandbox.attach(d.id)
            assert (await again.commands.run("echo same")).stdout == b"same\n"
            again.close()
        with pytest.raises(hangar.GoneError):
            await AsyncSandbox.attach(d.id)
        with pytest.raises(ValueError, match="closed"):
            await d.commands.run("true")  # the block released the handle

    run(main())


def test_twenty_sandboxes_at_once_from_one_loop(ctx):
    n = 20
    before = local_sandboxes(ctx)

    async def main():
        loop = asyncio.get_running_loop()
        started = asyncio.Event()
        count = [0]
        lock = threading.Lock()

        def ready(text):
            # On a thread of the package: count, and tell the loop when all are in.
            with lock:
                count[0] += 1
                if count[0] == n:
                    loop.call_soon_threadsafe(started.set)

        async with asyncio.timeout(DEADLINE):
            sbs = await asyncio.gather(*(AsyncSandbox.create(ctx) for _ in range(n)))
            assert len({sb.id for sb in sbs}) == n
            try:
                outs = await asyncio.gather(*(sb.commands.run(f"echo {i}") for i, sb in enumerate(sbs)))
                assert [r.stdout for r in outs] == [f"{i}\n".encode() for i in range(n)]
                # All twenty commands are running at the same time: each said
                # ready and waits; none can end before the loop cancels it.
                tasks = [asyncio.ensure_future(sb.commands.run("echo ready; sleep 300", on_stdout=ready))
                         for sb in sbs]
                await started.wait()
                assert not any(t.done() for t in tasks)
                for t in tasks:
                    t.cancel()
                results = await asyncio.gather(*tasks, return_exceptions=True)
                assert all(isinstance(r, asyncio.CancelledError) for r in results)
                assert all(idle(sb) for sb in sbs)
            finally:
                await asyncio.gather(*(sb.kill() for sb in sbs))
                for sb in sbs:
                    sb.close()

    run(main())
    assert local_sandboxes(ctx) == before


def test_cancelling_a_long_exec_stops_it_in_the_sandbox(async_target):
    ctx, provider = async_target
    marker = scratch_path("aio-cancel")

    async def main():
        async with await AsyncSandbox.create(ctx, provider=provider) as sb, removed_after(sb, marker):
            task = asyncio.ensure_future(sb.exec(f"sleep 300 & echo $$ $! > {marker}; wait"))
            await eventually("the command to start", lambda: sb.files.exists(marker))
            shell, child = (await sb.files.read(marker)).split()
            assert await alive(sb, shell) and await alive(sb, child)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The task ends once the call has: nothing runs on for it.
            assert idle(sb)
            # The command and what it started are stopped in the sandbox.
            await eventually("the shell to stop", lambda: _not(alive(sb, shell)))
            await eventually("its child to stop", lambda: _not(alive(sb, child)))
            assert (await sb.commands.run("echo usable")).stdout == b"usable\n"

    run(main())


async def _not(aw):
    return not await aw


def test_asyncio_timeout_around_calls(async_target):
    ctx, provider = async_target
    marker = scratch_path("aio-timeout")

    async def main():
        async with await AsyncSandbox.create(ctx, provider=provider) as sb, removed_after(sb, marker):
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(1):
                    await sb.commands.run(f"echo $$ > {marker}; sleep 300")
            pid = (await sb.files.read(marker)).strip()
            await eventually("the timed-out command to stop", lambda: _not(alive(sb, pid)))
            # Within the time, the same call returns its result.
            async with asyncio.timeout(30):
                assert (await sb.commands.run("echo in-time")).stdout == b"in-time\n"
            # wait_for too, and a call that cannot be interrupted ends before the task does.
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(sb.exec("sleep 300"), 0.5)
            assert idle(sb)

    run(main())


def test_a_cancelled_create_leaves_no_sandbox(ctx):
    made, cancelled = [], threading.Event()

    def on_event(name, details):
        # Inside the create, once the sandbox exists: it returns only
        # after the task was cancelled.
        if name == "sandbox.created":
            made.append(details["id"])
            loop.call_soon_threadsafe(created.set)
            cancelled.wait(DEADLINE)

    events = hangar.Context(on_event=on_event)
    before = local_sandboxes(ctx)

    async def main():
        global loop, created
        loop, created = asyncio.get_running_loop(), asyncio.Event()
        # Cancelled before its thread took it, and cancelled in the middle.
        task = asyncio.ensure_future(AsyncSandbox.create(events))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        task = asyncio.ensure_future(AsyncSandbox.create(events))
        await created.wait()
        task.cancel()
        cancelled.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
    # The sandbox the create made was killed before the task ended.
    assert len(made) == 1 and made[0] not in local_sandboxes(ctx)
    assert local_sandboxes(ctx) == before


def test_process_wait_is_cancellable_and_background_runs(ctx):
    async def main():
        async with await AsyncSandbox.create(ctx) as sb:
            got = []
            p = await sb.commands.run("read x; echo got $x", background=True, stdin=b"", on_stdout=got.append)
            await sb.commands.send_stdin(p.pid, "it\n")
            assert await p.wait(30) == 0
            p.close()
            q = await sb.start("sleep 300")
            waiting = asyncio.ensure_future(q.wait())
            await asyncio.sleep(0)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            # The wait was cancelled, not the process.
            assert await alive(sb, q.pid)
            with pytest.raises(hangar.DeadlineError):
                await q.wait(0.1)
            assert await sb.commands.kill(q.pid)
            assert await q.wait(30) == -1
            q.close()
            t = await sb.pty.create(hangar.PtySize(rows=20, cols=70))
            await sb.pty.resize(t, hangar.PtySize(rows=21, cols=71))
            assert await sb.pty.kill(t) is True
            assert await t.wait(30) == -1
            t.close()
            assert "".join(got) == "got it\n"

    run(main())


def test_watch_and_every_files_method(ctx):
    async def main():
        async with await AsyncSandbox.create(ctx) as sb:
            d = f"/tmp/aio-{secrets.token_hex(4)}"
            assert await sb.files.make_dir(d) is True and await sb.files.make_dir(d) is False
            w = await sb.files.watch_dir(d)
            await sb.files.write(f"{d}/a", b"1")
            assert await w.get_new_events() == [hangar.FilesystemEvent("a", hangar.EVENT_CREATE)]
            w.stop()
            assert (await sb.files.rename(f"{d}/a", f"{d}/b")).name == "b"
            assert (await sb.files.get_info(f"{d}/b")).bytes == 1
            assert await sb.files.exists(f"{d}/b") and not await sb.files.exists(f"{d}/a")
            await sb.files.remove(d)
            assert not await sb.files.exists(d)
            with pytest.raises(hangar.FileError):
                await sb.files.rename(f"{d}/a", f"{d}/c")

    run(main())


def test_sessions_and_checkpoints(ctx):
    async def main():
        s = await AsyncSession.create(ctx)
        try:
            sb = await s.sandbox()
            await sb.files.write("/workspace/turn", "one")
            cp = await AsyncCheckpoint.create(sb, workspace="/workspace", blob=b"conversation")
            assert cp.id in [c.id for c in await AsyncCheckpoint.list(ctx)]
            assert (await (await AsyncCheckpoint.lookup(ctx, cp.id)).read_blob()) == b"conversation"
            await sb.files.write("/workspace/turn", "two")
            await cp.restore(sb)
            assert await sb.files.read("/workspace/turn") == "one"
            await s.suspend()
            assert (await s.info()).state == hangar.SESSION_PARKED
            again = await AsyncSession.open(s.id)
            back = await again.resume()
            assert await back.files.read("/workspace/turn") == "one"
            assert s.id in [i.id for i in await AsyncSession.list(ctx)]
            await cp.delete()
            with pytest.raises(hangar.NotFoundError):
                await AsyncCheckpoint.lookup(ctx, cp.id)
        finally:
            await s.delete()

    run(main())


def test_a_cancelled_checkpoint_is_not_kept(ctx):
    async def main():
        async with await AsyncSandbox.create(ctx) as sb:
            await sb.exec("head -c 20000000 /dev/urandom > /workspace/big")
            before = {c.id for c in await AsyncCheckpoint.list(ctx)}
            loop, going, cancelled = asyncio.get_running_loop(), asyncio.Event(), threading.Event()

            def progress(done, total):
                # The first report waits for the cancel: the next one stops the capture.
                if not going.is_set():
                    loop.call_soon_threadsafe(going.set)
                    cancelled.wait(DEADLINE)
                return False

            task = asyncio.ensure_future(AsyncCheckpoint.create(sb, workspace="/workspace", select_all=True,
                                                                progress=progress))
            await going.wait()
            task.cancel()
            cancelled.set()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert {c.id for c in await AsyncCheckpoint.list(ctx)} == before

    run(main())


# ---- commands without callbacks: the extension's own threads, ends through the loop's eventfd ----

def eventfds():
    """This process's eventfds (the library keeps connections open: only these are the loops' ports)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[eventfd]"
        except FileNotFoundError:
            pass
    return n


def os_threads():
    return len(os.listdir("/proc/self/task"))


def test_many_commands_on_one_loop_each_end_reaches_its_caller(ctx):
    n = 40
    marker = f"/tmp/aio-many-{secrets.token_hex(4)}"

    async def main():
        async with await AsyncSandbox.create(ctx) as sb:
            async with asyncio.timeout(DEADLINE):
                # Different arguments, results of different sizes, failures among them, one cancelled.
                def call(i):
                    if i % 10 == 3:
                        return sb.exec("true", cwd=f"/none-{i}")
                    if i % 2:
                        return sb.commands.run(f"head -c {i * 1000} /dev/zero | tr '\\0' x; echo $V",
                                               envs={"V": str(i)})
                    return sb.exec(f"cat; echo {i} >&2; exit {i % 7}", stdin=f"in{i}".encode(), cwd="/tmp")

                long = asyncio.ensure_future(sb.exec(f"echo $$ > {marker}; sleep 300"))
                tasks = [asyncio.ensure_future(call(i)) for i in range(n)]
                await eventually("the long command to start", lambda: sb.files.exists(marker))
                long.cancel()
                results = await asyncio.gather(*tasks, return_exceptions=True)
                with pytest.raises(asyncio.CancelledError):
                    await long
                for i, r in enumerate(results):
                    if i % 10 == 3:
                        assert isinstance(r, hangar.InvalidArgumentError) and f"/none-{i}" in str(r), (i, r)
                    elif i % 2:
                        assert r.exit_code == 0 and r.stdout == b"x" * (i * 1000) + f"{i}\n".encode(), i
                    else:
                        assert (r.exit_code, r.stdout, r.stderr) == (i % 7, f"in{i}".encode(), f"{i}\n".encode())
                pid = (await sb.files.read(marker)).strip()
                await eventually("the cancelled command to stop", lambda: _not(alive(sb, pid)))
                assert idle(sb)

    run(main())


def test_the_same_errors_as_the_sync_call(ctx):
    async def main():
        async with await AsyncSandbox.create(ctx) as sb:
            # A careless caller: what the sync call refuses, the async one refuses alike.
            for kw in ({"stdin": "not bytes"}, {"env": "A=1"}, {"timeout": -1}, {"cwd": 5}):
                try:
                    sb.sync.exec("true", **kw)
                    sync_error = None
                except Exception as e:
                    sync_error = type(e)
                try:
                    await sb.exec("true", **kw)
                    async_error = None
                except Exception as e:
                    async_error = type(e)
                assert async_error is sync_error and (sync_error is not None or kw == {"timeout": -1}), kw
            with pytest.raises(hangar.GoneError):
                other = await AsyncSandbox.attach(ctx, sb.id)
                await other.kill()
                other.close()
                await sb.exec("true")
            assert idle(sb)
        with pytest.raises(ValueError, match="closed"):
            await sb.exec("true")

    run(main())


def test_the_end_of_asyncio_run_leaves_no_descriptor_and_threads_are_reused(ctx):
    sb = hangar.Sandbox.create(ctx)
    try:
        asb = AsyncSandbox(sb)

        async def burst(n):
            rs = await asyncio.gather(*(asb.exec(f"echo {i}") for i in range(n)))
            assert [r.stdout for r in rs] == [f"{i}\n".encode() for i in range(n)]

        run(burst(1))  # the extension's pool has a thread; the loop's port is gone with the loop
        before, threads = eventfds(), os_threads()

        async def watched():
            # While a loop runs commands, its port is one more eventfd.
            await burst(3)
            assert eventfds() == before + 1
            return await burst(10)

        run(watched())
        assert eventfds() == before
        after = os_threads()
        assert after <= threads + 10
        # A pool, not a thread per call: the next burst finds the threads idle.
        run(burst(10))
        run(burst(10))
        assert os_threads() == after
        assert eventfds() == before
        # Nothing of a call outlives it: the extension let go of every call it was handed.
        gc.collect()
        assert not [o for o in gc.get_objects() if type(o).__name__ == "_Job"]
    finally:
        sb.kill()
        sb.close()


def test_two_event_loops_in_two_threads(ctx):
    sb = hangar.Sandbox.create(ctx)
    errors, got = [], {}

    def thread(name):
        async def main():
            asb = AsyncSandbox(sb)
            rs = await asyncio.gather(*(asb.exec(f"echo {name}-{i}") for i in range(15)))
            got[name] = [r.stdout for r in rs]

        try:
            asyncio.run(main())
        except BaseException as e:
            errors.append(e)

    try:
        ts = [threading.Thread(target=thread, args=(name,)) for name in ("a", "b")]
        for t in ts:
            t.start()
        for t in ts:
            t.join(DEADLINE)
        assert not errors and not any(t.is_alive() for t in ts)
        for name in ("a", "b"):
            assert got[name] == [f"{name}-{i}\n".encode() for i in range(15)]
        assert sb._handle._busy == 0
    finally:
        sb.kill()
        sb.close()


class NoReaderLoop(asyncio.SelectorEventLoop):
    """A loop that cannot watch a file descriptor, as some event loops cannot."""

    def add_reader(self, fd, callback, *args):
        raise NotImplementedError


def test_a_loop_without_add_reader_takes_the_threads(ctx):
    marker = f"/tmp/aio-noreader-{secrets.token_hex(4)}"

    async def main():
        async with await AsyncSandbox.create(ctx) as sb:
            assert (await sb.exec("echo x")).stdout == b"x\n"
            task = asyncio.ensure_future(sb.exec(f"echo $$ > {marker}; sleep 300"))
            await eventually("the command to start", lambda: sb.files.exists(marker))
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            pid = (await sb.files.read(marker)).strip()
            await eventually("the cancelled command to stop", lambda: _not(alive(sb, pid)))

    loop = NoReaderLoop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_the_handle_and_the_input_are_held_while_the_command_runs(ctx):
    marker = f"/tmp/aio-held-{secrets.token_hex(4)}"

    async def main():
        sb = await AsyncSandbox.create(ctx)
        try:
            data = bytearray(b"first\n")
            task = asyncio.ensure_future(sb.exec(f"cat; touch {marker}; sleep 300", stdin=data))
            await eventually("the command to read its input", lambda: sb.files.exists(marker))
            # A careless caller: the input cannot change size under the running command...
            with pytest.raises(BufferError):
                data.extend(b"second\n")
            # ... and closing the handle refuses new calls but leaves it to the running one.
            sb.close()
            with pytest.raises(ValueError, match="closed"):
                await sb.exec("true")
            assert sb.sync._handle.ptr is not None
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The call has ended: the handle went with it and the input is the caller's again.
            assert sb.sync._handle.ptr is None
            data.extend(b"second\n")
        finally:
            # An attached handle's with-block leaves the sandbox running: kill it, or its
            # `sleep 300` keeps it (and its jail) alive past the suite for its whole lifetime.
            async with await AsyncSandbox.attach(ctx, sb.id) as again:
                await again.kill()

    run(main())
