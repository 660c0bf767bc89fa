"""sb.commands and sb.pty: the sandbox's commands and terminals, shaped as the E2B SDK's.

Both are views over the flat methods (Sandbox.exec(), Sandbox.start(),
Process): what they do, errors included, is what those do. Where hangar's
rules differ from E2B's, the docstrings say so.
"""

from __future__ import annotations

import codecs
import math
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, Literal, Optional, Tuple, Union, overload

from ._types import STDERR, STDOUT, Env, ExecResult
from .errors import NotFoundError
from .process import Process

if TYPE_CHECKING:
    # Only named in annotations: the sandbox module imports this one.
    from .sandbox import Sandbox

TextCallback = Callable[[str], None]
DataCallback = Callable[[bytes], None]
Data = Union[bytes, bytearray, memoryview, str]


def _seconds(timeout: Optional[float]) -> int:
    """A timeout in whole seconds for the library: None is 0 (its default), a fraction rounds up."""
    if timeout is None:
        return 0
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds or None, not {type(timeout).__name__}")
    if not math.isfinite(timeout) or timeout < 0:
        raise ValueError(f"timeout must be a finite number of seconds, 0 or more, not {timeout!r}")
    return math.ceil(timeout)


class _TextOutput:
    """on_stdout and on_stderr behind one on_output: each stream decoded as UTF-8 on its own.

    A character split between two chunks reaches the callback whole, with
    the second; an invalid byte becomes U+FFFD. flush() passes on what an
    unfinished character at the very end left.
    """

    def __init__(self, on_stdout: Optional[TextCallback], on_stderr: Optional[TextCallback]) -> None:
        self._fns: Dict[int, Optional[TextCallback]] = {STDOUT: on_stdout, STDERR: on_stderr}
        self._decoders = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in self._fns}

    def __call__(self, stream: int, data: bytes) -> None:
        fn = self._fns.get(stream)
        if fn is not None:
            text = self._decoders[stream].decode(data)
            if text:
                fn(text)

    def flush(self) -> None:
        for stream, fn in self._fns.items():
            text = self._decoders[stream].decode(b"", final=True)
            if fn is not None and text:
                fn(text)


def _text_output(on_stdout: Optional[TextCallback], on_stderr: Optional[TextCallback]) -> Optional[_TextOutput]:
    return None if on_stdout is None and on_stderr is None else _TextOutput(on_stdout, on_stderr)


def _signal_kill(sb: "Sandbox", pid: int) -> bool:
    try:
        with Process.attach(sb, pid) as p:
            p.kill()
    except NotFoundError:
        return False
    return True


def _write_to(sb: "Sandbox", pid: int, data: Data) -> None:
    with Process.attach(sb, pid) as p:
        p.write(data)


class Commands:
    """Commands in one sandbox (sb.commands), shaped as the E2B SDK's.

    Unlike E2B, a command that exits non-zero or runs out of time is a
    result, not an exception: run() returns the ExecResult and the caller
    reads exit_code and timed_out. Exceptions are hangar's own
    (hangar.HangarError subclasses: GoneError when the sandbox is dead).
    """

    __slots__ = ("_sb",)

    def __init__(self, sb: "Sandbox") -> None:
        self._sb = sb

    @overload
    def run(self, cmd: str, *, background: Literal[False] = False, envs: Optional[Env] = None,
            cwd: Optional[str] = None, user: Optional[str] = None, timeout: Optional[float] = None,
            on_stdout: Optional[TextCallback] = None, on_stderr: Optional[TextCallback] = None,
            stdin: Optional[bytes] = None, cancel: Optional[Callable[[], bool]] = None) -> ExecResult: ...

    @overload
    def run(self, cmd: str, *, background: Literal[True], envs: Optional[Env] = None,
            cwd: Optional[str] = None, user: Optional[str] = None, timeout: Optional[float] = None,
            on_stdout: Optional[TextCallback] = None, on_stderr: Optional[TextCallback] = None,
            stdin: Optional[bytes] = None, cancel: Optional[Callable[[], bool]] = None) -> Process: ...

    def run(self, cmd: str, *, background: bool = False, envs: Optional[Env] = None, cwd: Optional[str] = None,
            user: Optional[str] = None, timeout: Optional[float] = None, on_stdout: Optional[TextCallback] = None,
            on_stderr: Optional[TextCallback] = None, stdin: Optional[bytes] = None,
            cancel: Optional[Callable[[], bool]] = None) -> Union[ExecResult, Process]:
        """Runs cmd in a login shell (bash -lc) and returns its ExecResult.

        A non-zero exit is not an exception (E2B raises one): check
        exit_code. timeout: seconds the command may run (a fraction rounds
        up); None or 0 is HANGAR_EXEC_TIMEOUT_SECONDS, never "no limit" as
        in E2B; when it runs out, the result has timed_out set. envs, cwd,
        user: the command's variables, directory and user. on_stdout and
        on_stderr receive the output as text (UTF-8; invalid bytes become
        U+FFFD) while it runs, on the calling thread; an exception they
        raise stops the command and is raised here. The result keeps the
        output as bytes (result.stdout.text decodes it). stdin: bytes fed
        to the command, then closed. cancel() (hangar's own) is polled at
        least once a second: True stops the command with CanceledError.

        background=True starts it and returns the Process at once (stdin
        then keeps a pipe open when given, b"" included; timeout is the
        process's lifetime, None for none); its wait() returns the exit
        status, and the callbacks run on a library thread.
        """
        if background:
            if cancel is not None:
                raise ValueError("cancel= stops a command run in the foreground: kill() a background one")
            out = _text_output(on_stdout, on_stderr)
            p = Process.start(self._sb, cmd, cwd=cwd, user=user, env=envs, timeout=_seconds(timeout),
                              stdin=stdin is not None, on_output=out)
            if stdin:
                p.write(stdin)
            return p
        text = _text_output(on_stdout, on_stderr)
        r = self._sb.exec(cmd, timeout=_seconds(timeout), cwd=cwd, user=user, env=envs, stdin=stdin, on_output=text,
                          cancel=cancel)
        if text is not None:
            text.flush()
        return r

    def connect(self, pid: int, *, on_stdout: Optional[TextCallback] = None,
                on_stderr: Optional[TextCallback] = None) -> Process:
        """Follows a running command by pid, its output from now on (NotFoundError when there is none)."""
        return Process.attach(self._sb, pid, on_output=_text_output(on_stdout, on_stderr))

    def kill(self, pid: int) -> bool:
        """Sends SIGKILL to the command pid (not its children); False when no such process runs."""
        return _signal_kill(self._sb, pid)

    def send_stdin(self, pid: int, data: Data) -> None:
        """Writes to the stdin of a command started with background=True and stdin (str as UTF-8)."""
        _write_to(self._sb, pid, data)


@dataclass(frozen=True)
class PtySize:
    """A terminal's size in characters."""

    rows: int
    cols: int


# The terminals create() opened and their Process objects still hold, by
# (sandbox id, pid): input and resizes by pid go through them, as the
# library attaches to a running process without its terminal.
_terminals: "weakref.WeakValueDictionary[Tuple[str, int], Process]" = weakref.WeakValueDictionary()


class Pty:
    """Terminals in one sandbox (sb.pty), shaped as the E2B SDK's.

    A terminal is a Process (with its pid): create() returns it, and the
    other methods take it or its pid. By pid, they reach a terminal this
    program opened with create() and whose Process is still open; any
    other pid is attached to as a process without a terminal (writing to
    a terminal that way raises ProtocolError).
    """

    __slots__ = ("_sb",)

    def __init__(self, sb: "Sandbox") -> None:
        self._sb = sb

    def _terminal(self, pid: Union[int, Process]) -> Union[int, Process]:
        """The Process of a terminal, or the pid of a process to attach to."""
        if isinstance(pid, Process):
            return pid
        t = _terminals.get((self._sb.id, pid))
        return pid if t is None or t._handle.closed else t

    def create(self, size: PtySize = PtySize(24, 80), *, on_data: Optional[DataCallback] = None,
               cwd: Optional[str] = None, envs: Optional[Env] = None, user: Optional[str] = None,
               timeout: Optional[float] = None) -> Process:
        """Starts a login shell on a terminal of size; on_data(bytes) receives what it writes.

        on_data runs on a library thread; an exception it raises is raised
        by the next wait() or check() of the Process. timeout: the
        terminal's lifetime in seconds (None: no limit; E2B's default is 60).
        """
        if not isinstance(size, PtySize):
            raise TypeError(f"size must be a hangar.PtySize(rows, cols), not {type(size).__name__}")
        fn = on_data
        out = None if fn is None else (lambda stream, data: fn(data))
        p = Process.start(self._sb, None, pty=True, cols=size.cols, rows=size.rows, cwd=cwd, user=user, env=envs,
                          timeout=_seconds(timeout), on_output=out)
        _terminals[(self._sb.id, p.pid)] = p
        return p

    def send_stdin(self, pid: Union[int, Process], data: Data) -> None:
        """Types data into the terminal (str as UTF-8)."""
        t = self._terminal(pid)
        if isinstance(t, Process):
            t.write(data)
        else:
            _write_to(self._sb, t, data)

    def resize(self, pid: Union[int, Process], size: PtySize) -> None:
        """Resizes the terminal (UnsupportedError for a process without one)."""
        if not isinstance(size, PtySize):
            raise TypeError(f"size must be a hangar.PtySize(rows, cols), not {type(size).__name__}")
        t = self._terminal(pid)
        if isinstance(t, Process):
            t.resize(size.cols, size.rows)
            return
        with Process.attach(self._sb, t) as p:
            p.resize(size.cols, size.rows)

    def kill(self, pid: Union[int, Process]) -> bool:
        """Sends SIGKILL to the terminal's shell; False when it is no longer running."""
        return _signal_kill(self._sb, pid.pid if isinstance(pid, Process) else pid)
