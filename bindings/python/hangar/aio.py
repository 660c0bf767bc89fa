"""hangar.aio: the same API for asyncio, shaped as the E2B SDK's AsyncSandbox.

    from hangar.aio import AsyncSandbox

    async with await AsyncSandbox.create() as sb:
        r = await sb.commands.run("make test", timeout=600)

Each blocking call runs on a thread of the package's own (it spends its
time in the library with the GIL released), so one event loop drives many
sandboxes at once. A command without callbacks runs on threads of the
extension that never take the GIL, its end announced through an eventfd
the loop watches (one per loop, closed with it). Cancelling the task awaiting a call (task.cancel(),
asyncio.timeout(), asyncio.wait_for()) cancels the call:

  - a command (exec(), commands.run()), copy_out(), a checkpoint's create,
    restore or export, and a Process's wait() are stopped through the
    library's cancel callback within about a second; a command's process
    group in the sandbox gets SIGTERM;
  - any other call cannot be interrupted half-way: it runs to its end
    (bounded by HANGAR_REQUEST_TIMEOUT_SECONDS), and what a create, attach,
    open or fork made is then killed, deleted or released;

and the task raises CancelledError only once the call has ended, so no
thread is left running and no handle left behind. Callbacks (on_stdout,
on_output, progress) run on those threads, not on the event loop: hand
work to the loop with loop.call_soon_threadsafe().
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
import weakref
from typing import (Any, Callable, Concatenate, Coroutine, Generic, Iterator, List, Literal, Optional, ParamSpec,
                    Protocol, TypeVar, Union, cast, overload)

from . import _hangar as _h
from ._types import Env, ExecResult, Labels, SessionInfo, _pairs
from .checkpoint import Checkpoint, Progress
from .commands import Commands, Data, DataCallback, Pty, PtySize, TextCallback, _seconds
from .context import Context, _ctx_and_id
from .errors import CanceledError, DeadlineError
from .files import Files, WatchHandle
from .process import Process
from .sandbox import ForkResult, OutputCallback, Sandbox
from .session import Session, SessionForkResult

__all__ = ["AsyncSandbox", "AsyncSession", "AsyncCheckpoint", "AsyncProcess", "AsyncCommands", "AsyncFiles",
           "AsyncPty", "AsyncForkResult", "AsyncSessionForkResult"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_S = TypeVar("_S")

# The threads blocking calls run on: started as calls need them, each
# waiting in the library with the GIL released, so there are enough for
# every call a program keeps going at once. A call is handed over through a
# queue and its end reported to the loop with call_soon_threadsafe: no
# concurrent.futures.Future, whose locks and conditions would cost more
# than the rest of the hand-over.
_MAX_THREADS = 256


class _Waited:
    """A call's end as the loop sees it: who waits for it, and waiting for it whatever cancels the waiter."""

    __slots__ = ("loop", "fut", "settled", "result", "error", "ran", "delivered")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.fut: asyncio.Future[None] = loop.create_future()
        self.settled: Optional[asyncio.Future[None]] = None
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self.ran = False
        self.delivered = False

    def deliver(self) -> None:
        """On the loop: wakes whoever waits for the call."""
        self.delivered = True
        if not self.fut.done():
            self.fut.set_result(None)
        if self.settled is not None and not self.settled.done():
            self.settled.set_result(None)

    async def settle(self) -> None:
        """Waits for the call to end, whatever cancels the waiting task meanwhile."""
        while not self.delivered:
            if self.settled is None:
                self.settled = self.loop.create_future()
            try:
                await asyncio.shield(self.settled)
            except asyncio.CancelledError:
                pass  # cancelled again: the call still has to end first


class _Call(_Waited):
    """One blocking call: fn(stop) on a thread of the pool, its outcome, and who waits for it."""

    __slots__ = ("fn", "stop")

    def __init__(self, fn: Callable[[threading.Event], Any], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.fn = fn
        self.stop = threading.Event()

    def work(self) -> None:
        """On a thread of the pool: runs fn unless cancelled before it started."""
        if not self.stop.is_set():
            self.ran = True
            try:
                self.result = self.fn(self.stop)
            except BaseException as e:
                self.error = e
        try:
            self.loop.call_soon_threadsafe(self.deliver)
        except RuntimeError:
            pass  # the loop is closed: nobody waits any more


class _Pool:
    def __init__(self, size: int) -> None:
        self._size = size
        self._queue: "queue.SimpleQueue[_Call]" = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads = 0

    def submit(self, call: _Call) -> None:
        self._queue.put(call)
        if self._idle.acquire(blocking=False):
            return
        with self._lock:
            if self._threads < self._size:
                self._threads += 1
                threading.Thread(target=self._work, name=f"hangar-aio-{self._threads}", daemon=True).start()

    def _work(self) -> None:
        get, idle = self._queue.get, self._idle
        while True:
            call = get()
            call.work()
            del call
            idle.release()


_pool = _Pool(_MAX_THREADS)

# How long a Process.wait() sleeps in the library before it looks whether
# its task was cancelled.
_WAIT_SLICE = 0.25


async def _run(fn: Callable[[threading.Event], _R], undo: Optional[Callable[[_R], None]] = None) -> _R:
    """Runs fn(stop) on a thread; when the task is cancelled, sets stop and waits for fn to end.

    fn polls stop through the library's cancel callback where the call
    has one. What fn made despite the cancellation is undone with undo.
    """
    loop = asyncio.get_running_loop()
    call = _Call(fn, loop)
    _pool.submit(call)
    try:
        await call.fut
    except asyncio.CancelledError:
        call.stop.set()
        await call.settle()
        if undo is not None and call.ran and call.error is None:
            made, u = call.result, undo
            undoing = _Call(lambda stop: u(made), loop)
            _pool.submit(undoing)
            await undoing.settle()
        raise
    error, call.error = call.error, None
    if error is not None:
        raise error
    result: _R = call.result
    return result


# A command without Python callbacks (the common exec) takes a shorter way:
# the extension copies its arguments and runs it on threads of its own that
# never take the GIL, and reports its end through an eventfd this loop
# watches (a _Port), so the end of many calls wakes the loop once and the
# result is built on the loop thread. A Python thread would wake for the
# call, again for the GIL, and then wake the loop: on a small machine those
# wake-ups and GIL hand-overs cost more than the rest of the call's
# overhead. Cancelling sets a flag the library's cancel poll reads.
# Callbacks must run on a thread of the package, so calls with any go the
# way above.


class _Port:
    """A loop's end of the extension's threads: one eventfd, watched with add_reader().

    The loop's selector holds the only strong reference to it, so the
    eventfd is closed as soon as the loop is (asyncio.run() closes it).
    """

    __slots__ = ("cap", "fd", "__weakref__")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.cap, self.fd = _h.aio_port_new()
        loop.add_reader(self.fd, self.drain)

    def drain(self) -> None:
        for job, ran, result, error in _h.aio_port_drain(self.cap):
            job.ended(ran, result, error)


# The port of each loop that ran a command this way, or None where the loop
# cannot watch a file descriptor (add_reader: NotImplementedError).
_ports: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Optional[weakref.ref[_Port]]]" = \
    weakref.WeakKeyDictionary()


class _Job(_Waited):
    """A command on the extension's threads."""

    __slots__ = ("job",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.job: Any = None

    def ended(self, ran: int, result: Any, error: Optional[BaseException]) -> None:
        self.ran = bool(ran)
        self.result, self.error = result, error
        self.deliver()


def _port(loop: asyncio.AbstractEventLoop) -> Optional[_Port]:
    ref = _ports.get(loop, _no_port)
    if ref is None:
        return None
    live = ref()
    if live is None:
        # The loop's first command (or its port was let go of: a loop runs only while open).
        try:
            live = _Port(loop)
        except NotImplementedError:
            _ports[loop] = None
            return None
        _ports[loop] = weakref.ref(live)
    return live


def _no_port() -> None:
    return None


async def _exec(sb: Sandbox, command: str, timeout: int = 0, cwd: Optional[str] = None, user: Optional[str] = None,
                env: Optional[Env] = None, output_limit: int = 0, stdin: Optional[bytes] = None) -> ExecResult:
    """Sandbox.exec() without callbacks, on the extension's threads; a cancelled task stops the command."""
    loop = asyncio.get_running_loop()
    port = _port(loop)
    if port is None:
        return await _run(lambda stop: sb.exec(command, timeout=timeout, cwd=cwd, user=user, env=env,
                                               output_limit=output_limit, stdin=stdin, cancel=stop.is_set))
    handle = sb._handle
    call = _Job(loop)
    p = handle.__enter__()
    try:
        call.job = _h.aio_exec(port.cap, call, p, command, timeout, cwd, user, _pairs(env), output_limit, stdin)
    except BaseException:
        handle.__exit__(None, None, None)
        raise
    try:
        try:
            await call.fut
        except asyncio.CancelledError:
            _h.aio_cancel(call.job)
            await call.settle()
            raise
    finally:
        # Once the call has ended: a context callback's exception comes out here, as from the sync call.
        handle.__exit__(None, None, None)
    error, call.error = call.error, None
    if error is not None:
        raise error
    return ExecResult._from_raw(call.result)


def _stoppable(stop: threading.Event, user: Optional[Callable[[], bool]]) -> Callable[[], bool]:
    """A cancel callback: the task was cancelled, or the caller's own says stop."""
    if user is None:
        return stop.is_set
    fn = user
    return lambda: stop.is_set() or bool(fn())


def _method(fn: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[Any, _P], Coroutine[Any, Any, _R]]:
    """An async method of a wrapper that runs fn on the wrapped object (self._sync)."""

    async def call(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        sync = self._sync
        return await _run(lambda stop: fn(sync, *args, **kwargs))

    return _named(call, fn)


def _cancellable(fn: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[Any, _P], Coroutine[Any, Any, _R]]:
    """As _method, for an fn with cancel=: a cancelled task stops the call through it."""

    async def call(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        sync = self._sync
        user = cast(Optional[Callable[[], bool]], kwargs.pop("cancel", None))

        def run(stop: threading.Event) -> _R:
            kwargs["cancel"] = _stoppable(stop, user)
            return fn(sync, *args, **kwargs)

        return await _run(run)

    return _named(call, fn)


def _progressing(fn: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[Any, _P], Coroutine[Any, Any, _R]]:
    """As _method, for an fn with progress=: a cancelled task stops the call at its next progress."""

    async def call(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        sync = self._sync
        kwargs["progress"] = _progress(kwargs.get("progress"))
        return await _run(lambda stop: _with_stop(stop, lambda: fn(sync, *args, **kwargs)))

    return _named(call, fn)


# The stop event of the call running on this thread, for progress callbacks.
_current = threading.local()


def _with_stop(stop: threading.Event, fn: Callable[[], _R]) -> _R:
    _current.stop = stop
    try:
        return fn()
    finally:
        _current.stop = None


def _progress(user: Any) -> Progress:
    def progress(done: int, total: int) -> bool:
        stop: Optional[threading.Event] = getattr(_current, "stop", None)
        if stop is not None and stop.is_set():
            return True
        return bool(user(done, total)) if user is not None else False

    return progress


_F = TypeVar("_F", bound=Callable[..., Any])


def _named(call: _F, fn: Callable[..., Any]) -> _F:
    call.__name__ = fn.__name__
    call.__qualname__ = fn.__qualname__
    call.__doc__ = fn.__doc__
    return call


class _Closable(Protocol):
    def close(self) -> None: ...


_C = TypeVar("_C", bound=_Closable)
_W = TypeVar("_W", bound="_Wrapper[Any]")


class _Wrapper(Generic[_C]):
    """What every wrapper of a handle has: the sync object, close(), an async with-block that closes."""

    async def __aenter__(self: _W) -> _W:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def __init__(self, sync: _C) -> None:
        self._sync = sync

    @property
    def sync(self) -> _C:
        """The object this wraps (its calls block)."""
        return self._sync

    def close(self) -> None:
        """Releases the handle (see the sync class's close())."""
        self._sync.close()

    def __repr__(self) -> str:
        return f"<hangar.aio {self._sync!r}>"


class AsyncProcess(_Wrapper[Process]):
    """A Process for asyncio: the same methods, wait() awaitable and cancellable."""

    @property
    def pid(self) -> int:
        """The process id inside the sandbox."""
        return self._sync.pid

    write = _method(Process.write)
    close_stdin = _method(Process.close_stdin)
    resize = _method(Process.resize)
    signal = _method(Process.signal)
    kill = _method(Process.kill)

    def check(self) -> None:
        """Raises what on_output raised since the last check, if anything."""
        self._sync.check()

    async def wait(self, timeout: Optional[float] = None) -> int:
        """Waits for the exit and returns its status (-1: killed by a signal); see Process.wait().

        Cancelling the task stops the wait (within a quarter of a second),
        not the process.
        """
        p = self._sync

        def wait(stop: threading.Event) -> int:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                left = _WAIT_SLICE if deadline is None else min(_WAIT_SLICE, deadline - time.monotonic())
                try:
                    return p.wait(max(0.0, left))
                except DeadlineError:
                    if stop.is_set():
                        raise CanceledError("the wait was cancelled") from None
                    if deadline is not None and time.monotonic() >= deadline:
                        raise

        return await _run(wait)


class AsyncCommands:
    """sb.commands for asyncio: see hangar.commands.Commands; run() is cancellable."""

    __slots__ = ("_sync",)

    def __init__(self, sync: Commands) -> None:
        self._sync = sync

    @overload
    async def run(self, cmd: str, *, background: Literal[False] = False, envs: Optional[Env] = None,
                  cwd: Optional[str] = None, user: Optional[str] = None, timeout: Optional[float] = None,
                  on_stdout: Optional[TextCallback] = None, on_stderr: Optional[TextCallback] = None,
                  stdin: Optional[bytes] = None, cancel: Optional[Callable[[], bool]] = None) -> ExecResult: ...

    @overload
    async def run(self, cmd: str, *, background: Literal[True], envs: Optional[Env] = None,
                  cwd: Optional[str] = None, user: Optional[str] = None, timeout: Optional[float] = None,
                  on_stdout: Optional[TextCallback] = None, on_stderr: Optional[TextCallback] = None,
                  stdin: Optional[bytes] = None, cancel: Optional[Callable[[], bool]] = None) -> AsyncProcess: ...

    async def run(self, cmd: str, *, background: bool = False, envs: Optional[Env] = None,
                  cwd: Optional[str] = None, user: Optional[str] = None, timeout: Optional[float] = None,
                  on_stdout: Optional[TextCallback] = None, on_stderr: Optional[TextCallback] = None,
                  stdin: Optional[bytes] = None,
                  cancel: Optional[Callable[[], bool]] = None) -> Union[ExecResult, AsyncProcess]:
        """As Commands.run(); a cancelled task stops the command in the sandbox and raises CancelledError.

        on_stdout and on_stderr run on a thread of the package, not the loop.
        """
        c = self._sync
        if background:
            p = await _run(lambda stop: c.run(cmd, background=True, envs=envs, cwd=cwd, user=user, timeout=timeout,
                                              on_stdout=on_stdout, on_stderr=on_stderr, stdin=stdin),
                           undo=Process.close)
            return AsyncProcess(p)
        if on_stdout is None and on_stderr is None and cancel is None:
            return await _exec(c._sb, cmd, _seconds(timeout), cwd, user, envs, 0, stdin)
        return await _run(lambda stop: c.run(cmd, envs=envs, cwd=cwd, user=user, timeout=timeout, on_stdout=on_stdout,
                                             on_stderr=on_stderr, stdin=stdin, cancel=_stoppable(stop, cancel)))

    async def connect(self, pid: int, *, on_stdout: Optional[TextCallback] = None,
                      on_stderr: Optional[TextCallback] = None) -> AsyncProcess:
        """As Commands.connect()."""
        c = self._sync
        return AsyncProcess(await _run(lambda stop: c.connect(pid, on_stdout=on_stdout, on_stderr=on_stderr),
                                       undo=Process.close))

    kill = _method(Commands.kill)
    send_stdin = _method(Commands.send_stdin)


def _target(pid: Union[int, AsyncProcess]) -> Union[int, Process]:
    return pid.sync if isinstance(pid, AsyncProcess) else pid


class AsyncPty:
    """sb.pty for asyncio: see hangar.commands.Pty."""

    __slots__ = ("_sync",)

    def __init__(self, sync: Pty) -> None:
        self._sync = sync

    async def create(self, size: PtySize = PtySize(24, 80), *, on_data: Optional[DataCallback] = None,
                     cwd: Optional[str] = None, envs: Optional[Env] = None, user: Optional[str] = None,
                     timeout: Optional[float] = None) -> AsyncProcess:
        """As Pty.create(); on_data runs on a thread of the package, not the loop."""
        t = self._sync
        return AsyncProcess(await _run(lambda stop: t.create(size, on_data=on_data, cwd=cwd, envs=envs, user=user,
                                                             timeout=timeout), undo=Process.close))

    async def send_stdin(self, pid: Union[int, AsyncProcess], data: Data) -> None:
        """As Pty.send_stdin()."""
        t, target = self._sync, _target(pid)
        await _run(lambda stop: t.send_stdin(target, data))

    async def resize(self, pid: Union[int, AsyncProcess], size: PtySize) -> None:
        """As Pty.resize()."""
        t, target = self._sync, _target(pid)
        await _run(lambda stop: t.resize(target, size))

    async def kill(self, pid: Union[int, AsyncProcess]) -> bool:
        """As Pty.kill()."""
        t, target = self._sync, _target(pid)
        return await _run(lambda stop: t.kill(target))


class AsyncWatchHandle:
    """A WatchHandle for asyncio."""

    __slots__ = ("_sync",)

    def __init__(self, sync: WatchHandle) -> None:
        self._sync = sync

    get_new_events = _method(WatchHandle.get_new_events)

    def stop(self) -> None:
        """Stops the watch; get_new_events() then raises ValueError."""
        self._sync.stop()


class AsyncFiles:
    """sb.files for asyncio: see hangar.files.Files."""

    __slots__ = ("_sync",)

    def __init__(self, sync: Files) -> None:
        self._sync = sync

    @overload
    async def read(self, path: str, format: Literal["text"] = "text") -> str: ...

    @overload
    async def read(self, path: str, format: Literal["bytes"]) -> bytes: ...

    async def read(self, path: str, format: Literal["text", "bytes"] = "text") -> Union[str, bytes]:
        """As Files.read()."""
        f = self._sync
        data = await _run(lambda stop: f.read(path, "bytes"))
        if format not in ("text", "bytes"):
            raise ValueError(f'format must be "text" or "bytes", not {format!r}')
        return data if format == "bytes" else data.decode("utf-8")

    write = _method(Files.write)
    list = _method(Files.list)
    get_info = _method(Files.get_info)
    exists = _method(Files.exists)
    remove = _method(Files.remove)
    make_dir = _method(Files.make_dir)
    rename = _method(Files.rename)

    async def watch_dir(self, path: str, *, recursive: bool = False) -> AsyncWatchHandle:
        """As Files.watch_dir()."""
        f = self._sync
        return AsyncWatchHandle(await _run(lambda stop: f.watch_dir(path, recursive=recursive)))


class AsyncForkResult:
    """One fork of AsyncSandbox.fork(): a sandbox, or why that fork failed."""

    def __init__(self, r: ForkResult) -> None:
        self.index = r.index
        self.sandbox = None if r.sandbox is None else AsyncSandbox(r.sandbox)
        self.error = r.error


def _discard_forks(results: List[ForkResult]) -> None:
    for r in results:
        if r.sandbox is not None:
            r.sandbox._discard()


class AsyncSandbox(_Wrapper[Sandbox]):
    """A Sandbox for asyncio: the same methods, each awaitable (see hangar.Sandbox).

        sb = await AsyncSandbox.create()
        async with await AsyncSandbox.create() as sb: ...

    The async with-block kills the sandbox when it ends, unless keep=True.
    """

    @classmethod
    async def create(cls, ctx: Optional[Context] = None, *, provider: Optional[str] = None,
                     template: Optional[str] = None, timeout: int = 0, env: Optional[Env] = None,
                     network: Optional[bool] = None, tier: Optional[str] = None, environment: Optional[str] = None,
                     keep: bool = False) -> "AsyncSandbox":
        """As Sandbox.create(); a create whose task was cancelled is killed once it has been made."""
        sb = await _run(lambda stop: Sandbox.create(ctx, provider=provider, template=template, timeout=timeout,
                                                    env=env, network=network, tier=tier, environment=environment,
                                                    keep=keep), undo=Sandbox._discard)
        return cls(sb)

    @overload
    @classmethod
    async def attach(cls, ctx: str, *, provider: Optional[str] = None) -> "AsyncSandbox": ...

    @overload
    @classmethod
    async def attach(cls, ctx: Optional[Context], id: str, *, provider: Optional[str] = None) -> "AsyncSandbox": ...

    @classmethod
    async def attach(cls, ctx: Union[Context, str, None], id: Optional[str] = None, *,
                     provider: Optional[str] = None) -> "AsyncSandbox":
        """As Sandbox.attach(): attach(id) or attach(ctx, id)."""
        sb = await _run(lambda stop: Sandbox.attach(*_ctx_and_id(ctx, id, "sandbox id"), provider=provider),
                        undo=Sandbox.close)
        return cls(sb)

    async def __aexit__(self, *exc: object) -> None:
        sync = self._sync
        await _run(lambda stop: sync.__exit__(None, None, None))

    @property
    def id(self) -> str:
        """The sandbox's id."""
        return self._sync.id

    @property
    def sandbox_id(self) -> str:
        """The sandbox's id (the E2B SDK's name for it)."""
        return self._sync.id

    @property
    def context(self) -> Context:
        """The context the sandbox was created or attached in."""
        return self._sync.context

    @property
    def provider(self) -> str:
        """The name of the sandbox's provider."""
        return self._sync.provider

    @property
    def commands(self) -> AsyncCommands:
        """Commands shaped as the E2B SDK's: await sb.commands.run(cmd, ...)."""
        return AsyncCommands(self._sync.commands)

    @property
    def files(self) -> AsyncFiles:
        """Files shaped as the E2B SDK's: await sb.files.read(path), ..."""
        return AsyncFiles(self._sync.files)

    @property
    def pty(self) -> AsyncPty:
        """Terminals shaped as the E2B SDK's: await sb.pty.create(...)."""
        return AsyncPty(self._sync.pty)

    def keep(self) -> "AsyncSandbox":
        """Keeps the sandbox running when the async with-block ends."""
        self._sync.keep()
        return self

    info = _method(Sandbox.info)
    _exec_threaded = _cancellable(Sandbox.exec)

    async def exec(self, command: str, *, timeout: int = 0, cwd: Optional[str] = None, user: Optional[str] = None,
                   env: Optional[Env] = None, output_limit: int = 0, stdin: Optional[bytes] = None,
                   on_output: Optional[OutputCallback] = None,
                   cancel: Optional[Callable[[], bool]] = None) -> ExecResult:
        """As Sandbox.exec(); a cancelled task stops the command in the sandbox and raises CancelledError.

        on_output and cancel run on a thread of the package, not the loop.
        """
        if on_output is None and cancel is None:
            return await _exec(self._sync, command, timeout, cwd, user, env, output_limit, stdin)
        return await self._exec_threaded(command, timeout=timeout, cwd=cwd, user=user, env=env,
                                         output_limit=output_limit, stdin=stdin, on_output=on_output, cancel=cancel)
    read_file = _method(Sandbox.read_file)
    write_file = _method(Sandbox.write_file)
    copy_in = _method(Sandbox.copy_in)
    copy_out = _cancellable(Sandbox.copy_out)
    list_files = _method(Sandbox.list_files)
    stat = _method(Sandbox.stat)
    exists = _method(Sandbox.exists)
    mkdir = _method(Sandbox.mkdir)
    rename = _method(Sandbox.rename)
    remove = _method(Sandbox.remove)
    pause = _method(Sandbox.pause)
    resume = _method(Sandbox.resume)
    pause_filesystem = _method(Sandbox.pause_filesystem)
    set_timeout = _method(Sandbox.set_timeout)
    kill = _method(Sandbox.kill)
    snapshot = _method(Sandbox.snapshot)
    metrics = _method(Sandbox.metrics)
    logs = _method(Sandbox.logs)
    expose_port = _method(Sandbox.expose_port)

    async def start(self, command: Optional[str] = None, **kw: Any) -> AsyncProcess:
        """Starts a background process: see Process.start()."""
        sync = self._sync
        return AsyncProcess(await _run(lambda stop: sync.start(command, **kw), undo=Process.close))

    async def fork(self, count: int = 1) -> List[AsyncForkResult]:
        """As Sandbox.fork(); forks made for a cancelled task are killed."""
        sync = self._sync
        return [AsyncForkResult(r) for r in await _run(lambda stop: sync.fork(count), undo=_discard_forks)]


class AsyncSessionForkResult:
    """One fork of AsyncSession.fork(): a session and how it was made, or its error."""

    def __init__(self, r: SessionForkResult) -> None:
        self.index = r.index
        self.method = r.method
        self.session = None if r.session is None else AsyncSession(r.session)
        self.error = r.error


def _discard_session_forks(results: List[SessionForkResult]) -> None:
    for r in results:
        if r.session is not None:
            r.session._discard()


class AsyncSession(_Wrapper[Session]):
    """A Session for asyncio: the same methods, each awaitable (see hangar.Session)."""

    @classmethod
    async def create(cls, ctx: Optional[Context] = None, *, id: Optional[str] = None,
                     environment: Optional[str] = None, provider: Optional[str] = None,
                     template: Optional[str] = None, timeout: int = 0, env: Optional[Env] = None,
                     network: Optional[bool] = None, tier: Optional[str] = None, workspace: Optional[str] = None,
                     user: Optional[str] = None, labels: Optional[Labels] = None,
                     exclusive_credential: bool = False) -> "AsyncSession":
        """As Session.create(); a session made for a cancelled task is deleted."""
        s = await _run(lambda stop: Session.create(
            ctx, id=id, environment=environment, provider=provider, template=template, timeout=timeout, env=env,
            network=network, tier=tier, workspace=workspace, user=user, labels=labels,
            exclusive_credential=exclusive_credential), undo=Session._discard)
        return cls(s)

    @overload
    @classmethod
    async def open(cls, ctx: str) -> "AsyncSession": ...

    @overload
    @classmethod
    async def open(cls, ctx: Optional[Context], id: str) -> "AsyncSession": ...

    @classmethod
    async def open(cls, ctx: Union[Context, str, None], id: Optional[str] = None) -> "AsyncSession":
        """As Session.open(): open(id) or open(ctx, id)."""
        return cls(await _run(lambda stop: Session.open(*_ctx_and_id(ctx, id, "session id")), undo=Session.close))

    @classmethod
    async def list(cls, ctx: Optional[Context] = None) -> Iterator[SessionInfo]:
        """As Session.list()."""
        return await _run(lambda stop: Session.list(ctx))

    @property
    def id(self) -> str:
        """The session's id."""
        return self._sync.id

    info = _method(Session.info)
    suspend = _method(Session.suspend)
    archive = _method(Session.archive)
    delete = _method(Session.delete)
    keep = _method(Session.keep)

    async def sandbox(self) -> AsyncSandbox:
        """As Session.sandbox()."""
        sync = self._sync
        return AsyncSandbox(await _run(lambda stop: sync.sandbox(), undo=Sandbox.close))

    async def resume(self) -> AsyncSandbox:
        """As Session.resume()."""
        sync = self._sync
        return AsyncSandbox(await _run(lambda stop: sync.resume(), undo=Sandbox.close))

    async def fork(self, count: int = 1) -> List[AsyncSessionForkResult]:
        """As Session.fork(); a cancelled task gives the fork up and keeps nothing.

        The library stops the fork through its cancel callback; sessions a
        fork finished just as the task was cancelled are deleted.
        """
        sync = self._sync
        return [AsyncSessionForkResult(r)
                for r in await _run(lambda stop: sync.fork(count, cancel=_stoppable(stop, None)),
                                    undo=_discard_session_forks)]


def _discard_checkpoint(cp: Checkpoint) -> None:
    try:
        cp.delete()
    finally:
        cp.close()


class AsyncCheckpoint(_Wrapper[Checkpoint]):
    """A Checkpoint for asyncio: the same methods, each awaitable (see hangar.Checkpoint).

    A cancelled task stops a create, restore or export at its next
    progress report.
    """

    @classmethod
    async def create(cls, sb: AsyncSandbox, *, workspace: Optional[str] = None, select_all: bool = False,
                     native: bool = True, session_id: Optional[str] = None, parent_id: Optional[str] = None,
                     blob: Optional[bytes] = None, labels: Optional[Labels] = None, user: Optional[str] = None,
                     timeout: int = 0, progress: Optional[Progress] = None) -> "AsyncCheckpoint":
        """As Checkpoint.create()."""
        p = _progress(progress)
        cp = await _run(lambda stop: _with_stop(stop, lambda: Checkpoint.create(
            sb.sync, workspace=workspace, select_all=select_all, native=native, session_id=session_id,
            parent_id=parent_id, blob=blob, labels=labels, user=user, timeout=timeout, progress=p)),
            undo=_discard_checkpoint)
        return cls(cp)

    @overload
    @classmethod
    async def lookup(cls, ctx: str) -> "AsyncCheckpoint": ...

    @overload
    @classmethod
    async def lookup(cls, ctx: Optional[Context], id: str) -> "AsyncCheckpoint": ...

    @classmethod
    async def lookup(cls, ctx: Union[Context, str, None], id: Optional[str] = None) -> "AsyncCheckpoint":
        """As Checkpoint.lookup(): lookup(id) or lookup(ctx, id)."""
        return cls(await _run(lambda stop: Checkpoint.lookup(*_ctx_and_id(ctx, id, "checkpoint id")),
                              undo=Checkpoint.close))

    @classmethod
    async def list(cls, ctx: Optional[Context] = None, session_id: Optional[str] = None) -> List["AsyncCheckpoint"]:
        """As Checkpoint.list()."""
        return [cls(cp) for cp in await _run(lambda stop: list(Checkpoint.list(ctx, session_id)))]

    @property
    def id(self) -> str:
        """The checkpoint's id."""
        return self._sync.id

    info = _method(Checkpoint.info)
    read_blob = _method(Checkpoint.read_blob)
    delete = _method(Checkpoint.delete)
    export = _progressing(Checkpoint.export)

    async def restore(self, sb: AsyncSandbox, *, workspace: Optional[str] = None, merge: bool = False,
                      native: bool = True, user: Optional[str] = None, timeout: int = 0,
                      progress: Optional[Progress] = None) -> None:
        """As Checkpoint.restore()."""
        sync, p = self._sync, _progress(progress)
        await _run(lambda stop: _with_stop(stop, lambda: sync.restore(sb.sync, workspace=workspace, merge=merge,
                                                                      native=native, user=user, timeout=timeout,
                                                                      progress=p)))
