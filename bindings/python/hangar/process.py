"""hangar.Process: a background process or terminal in a sandbox."""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Union

from . import _hangar as _h
from ._types import SIGKILL, SIGTERM, Env, _pairs
from .context import _Adopt, _Handle, _Holder

if TYPE_CHECKING:
    # Only named in annotations: the sandbox module imports this one.
    from .sandbox import Sandbox

OutputCallback = Callable[[int, bytes], None]


class Process:
    """Follows one process in a sandbox.

    Output reaches on_output(stream, data) from a library thread (with the
    GIL held) from the first byte on; an exception it raises is re-raised by
    the next wait() or check(), and the output that comes meanwhile is
    dropped (on_output is called again once it was raised). Releasing the
    handle (close(), or dropping it) stops following the process; the
    process keeps running.
    """

    def __init__(self, sb: Sandbox, ptr: Any, holder: Optional[_Holder]) -> None:
        self._handle = _Handle(ptr, functools.partial(Process._release, holder), "process handle",
                               sb.context._cbs)
        self._sb = sb
        self._holder = holder
        self._pid = int(_h.hangar_process_pid(ptr))

    @classmethod
    def start(cls, sb: Sandbox, command: Optional[str] = None, *, pty: bool = False, cols: int = 0, rows: int = 0,
              stdin: bool = False, cwd: Optional[str] = None, user: Optional[str] = None,
              env: Optional[Env] = None, timeout: int = 0,
              on_output: Optional[OutputCallback] = None) -> "Process":
        """Starts bash -lc command in the background; with pty=True and no command, a login shell.

        stdin=True keeps a pipe's stdin open for write(). timeout: lifetime in
        seconds (0: none).
        """
        return cls._open(sb, command, 0, on_output, cwd, user, env, pty, cols, rows, stdin, timeout)

    @classmethod
    def attach(cls, sb: Sandbox, pid: int, *, on_output: Optional[OutputCallback] = None) -> "Process":
        """Follows a running process by pid; output from now on. NotFoundError when there is none."""
        return cls._open(sb, None, pid, on_output, None, None, None, False, 0, 0, False, 0)

    @classmethod
    def _open(cls, sb: Sandbox, command: Optional[str], pid: int, on_output: Optional[OutputCallback],
              cwd: Optional[str], user: Optional[str], env: Optional[Env], pty: bool, cols: int, rows: int,
              stdin: bool, timeout: int) -> "Process":
        holder = None
        if on_output is not None:
            fn = on_output
            seen: List[int] = [0]

            def out(t: Any) -> None:
                seen[0] = threading.get_ident()
                fn(t[0], t[1])

            holder = _Holder(out)
            holder.thread = seen
        with _Adopt(Process.close) as own, sb._handle as p:
            try:
                ptr = _h.py_process_start(p, command, pid, cwd, user, _pairs(env), int(pty), cols, rows,
                                          int(stdin), timeout, None if holder is None else holder.ptr)
            except BaseException:
                if holder is not None:
                    holder.free()
                raise
            return own(cls(sb, ptr, holder))

    def __enter__(self) -> "Process":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        """Stops following the process: no more callbacks once this returns, or, while
        calls on the handle run on other threads, once the last of them returns."""
        handle = getattr(self, "_handle", None)
        if handle is not None:
            handle.close()

    @staticmethod
    def _release(holder: Optional[_Holder], ptr: Any) -> None:
        if holder is not None and holder.thread and holder.thread[0] == threading.get_ident():
            # Dropped by its own output callback (or collected there): the
            # library waits for that thread to leave the callback, so the
            # release happens on another thread.
            threading.Thread(target=Process._release_now, args=(ptr, holder), daemon=True).start()
            return
        Process._release_now(ptr, holder)

    @staticmethod
    def _release_now(ptr: Any, holder: Optional[_Holder]) -> None:
        _h.hangar_process_unref(ptr)
        if holder is not None:
            holder.free()

    @property
    def pid(self) -> int:
        """The process id inside the sandbox."""
        return self._pid

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox the process runs in; the handle keeps it (and its context) alive."""
        return self._sb

    def write(self, data: Union[bytes, bytearray, memoryview, str]) -> None:
        """Writes to stdin (stdin=True) or the terminal (str as UTF-8)."""
        with self._handle as p:
            _h.hangar_process_write(p, data.encode() if isinstance(data, str) else data)

    def close_stdin(self) -> None:
        """Closes stdin so the process reads EOF (on a terminal, write "\\x04")."""
        with self._handle as p:
            _h.hangar_process_close_stdin(p)

    def resize(self, cols: int, rows: int) -> None:
        """Resizes the terminal (UnsupportedError without one)."""
        with self._handle as p:
            _h.hangar_process_resize(p, cols, rows)

    def signal(self, sig: int = SIGTERM) -> None:
        """Sends SIGTERM or SIGKILL to the process."""
        with self._handle as p:
            _h.hangar_process_signal(p, sig)

    def kill(self) -> None:
        """Sends SIGKILL to the process (not its children); NotFoundError when it has exited."""
        self.signal(SIGKILL)

    def wait(self, timeout: Optional[float] = None) -> int:
        """Waits for the exit and returns its status (-1: killed by a signal).

        timeout in seconds (None: as long as it takes); DeadlineError when
        it is still running. Re-raises what on_output raised.
        """
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        with self._handle as p:
            try:
                _rc, code = _h.hangar_process_wait(p, ms)
            finally:
                if self._holder is not None:
                    self._holder.check()
        return int(code)

    def check(self) -> None:
        """Raises what on_output raised since the last check, if anything."""
        with self._handle:
            if self._holder is not None:
                self._holder.check()
