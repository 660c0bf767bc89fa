"""hangar.Sandbox: one sandbox on one provider."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Union

from . import _hangar as _h
from ._types import (NETWORK_DEFAULT, NETWORK_OFF, NETWORK_ON, Env, ExecResult, FileInfo, LogEntry, Metric,
                     SandboxInfo, _pairs)
from .context import Context
from .errors import GoneError

if TYPE_CHECKING:
    from .process import Process

OutputCallback = Callable[[int, bytes], None]
PathLike = Union[str, "os.PathLike[str]"]


def _network(network: Optional[bool]) -> int:
    return NETWORK_DEFAULT if network is None else NETWORK_ON if network else NETWORK_OFF


class ForkResult:
    """One fork of Sandbox.fork(): a sandbox, or why that fork failed."""

    def __init__(self, index: int, sandbox: Optional["Sandbox"], error: Optional[Exception]) -> None:
        self.index = index
        self.sandbox = sandbox
        self.error = error


class Sandbox:
    """A sandbox handle.

    Sandbox.create() makes one; as a context manager it is killed when the
    block ends, unless keep=True (or .keep() was called). Releasing the
    handle (close(), or dropping it) never kills the sandbox itself.
    Every method may raise the HangarError subclass of its failure;
    GoneError means the sandbox is dead.
    """

    def __init__(self, ctx: Context, ptr: Any, *, keep: bool = True) -> None:
        # The handle owns one reference on ptr; ctx is kept alive with it.
        self._ctx = ctx
        self._ptr: Any = ptr
        self._keep = keep
        self._id: str = _h.hangar_sandbox_id(ptr)

    @classmethod
    def _borrowed(cls, ctx: Context, ptr: Any, *, keep: bool = True) -> "Sandbox":
        return cls(ctx, _h.hangar_sandbox_ref(ptr), keep=keep)

    @classmethod
    def create(cls, ctx: Context, *, provider: Optional[str] = None, template: Optional[str] = None,
               timeout: int = 0, env: Optional[Env] = None, network: Optional[bool] = None,
               tier: Optional[str] = None, environment: Optional[str] = None, keep: bool = False) -> "Sandbox":
        """Creates a sandbox and waits until it answers.

        provider: a provider name, else the tier (fast, isolated, default,
        heavy) picks one, falling back past full or unreachable ones.
        template: template or image id. timeout: lifetime in seconds (0:
        HANGAR_SANDBOX_TIMEOUT_SECONDS, negative: none). env: variables for
        every command. network: on/off (None: the provider's setting).
        environment: a name in HANGAR_ENVIRONMENTS_FILE filling what is
        left unset. keep: not killed when a with-block ends.
        """
        try:
            ptr = _h.py_sandbox_create(ctx._raw(), provider, template, timeout, _pairs(env), _network(network),
                                       tier, environment)
        finally:
            ctx._check_callbacks()
        return cls(ctx, ptr, keep=keep)

    @classmethod
    def attach(cls, ctx: Context, id: str, *, provider: Optional[str] = None) -> "Sandbox":
        """Attaches to an existing sandbox by id (GoneError when there is none); never killed by a with-block."""
        _rc, ptr = _h.hangar_sandbox_attach(ctx._raw(), provider, id)
        return cls(ctx, ptr, keep=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if not self._keep and self._ptr is not None:
                try:
                    self.kill()
                except GoneError:
                    pass
        finally:
            self.close()

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<hangar.Sandbox {self._id}>"

    def close(self) -> None:
        """Releases the handle (the sandbox lives on until killed or expired)."""
        ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr is not None:
            _h.hangar_sandbox_unref(ptr)

    def keep(self) -> "Sandbox":
        """Keeps the sandbox running when the with-block ends."""
        self._keep = True
        return self

    def _raw(self) -> Any:
        if self._ptr is None:
            raise ValueError("the sandbox handle is closed")
        return self._ptr

    @property
    def context(self) -> Context:
        """The context the sandbox was created or attached in; the handle keeps it alive."""
        return self._ctx

    @property
    def id(self) -> str:
        """The sandbox's id."""
        return self._id

    @property
    def provider(self) -> str:
        """The name of the sandbox's provider."""
        name: str = _h.py_sandbox_provider_name(self._raw())
        return name

    def info(self) -> SandboxInfo:
        """Asks the provider for the sandbox's current state."""
        return SandboxInfo(**_h.py_sandbox_get_info(self._raw()))

    # ---- commands -------------------------------------------------------------------

    def exec(self, command: str, *, timeout: int = 0, cwd: Optional[str] = None, user: Optional[str] = None,
             env: Optional[Env] = None, output_limit: int = 0, stdin: Optional[bytes] = None,
             on_output: Optional[OutputCallback] = None,
             cancel: Optional[Callable[[], bool]] = None) -> ExecResult:
        """Runs a shell command once (bash -lc) and returns its result.

        timeout: the in-sandbox timeout in seconds (0: the default); a command
        stopped by it has timed_out set. on_output(stream, data) receives
        live output on the calling thread; an exception it raises cancels the
        command and is raised here. cancel() is polled at least once a second;
        returning True stops the command with CanceledError.
        """
        return ExecResult._from_raw(_h.py_sandbox_exec(
            self._raw(), command, timeout, cwd, user, _pairs(env), output_limit, stdin,
            None if on_output is None else (lambda t, f=on_output: f(t[0], t[1])), cancel))

    def start(self, command: Optional[str] = None, **kw: Any) -> "Process":
        """Starts a background process: see Process.start()."""
        from .process import Process

        return Process.start(self, command, **kw)

    # ---- files ------------------------------------------------------------------------

    def read_file(self, path: str) -> bytes:
        """A whole file's bytes (TooLargeError over HANGAR_READ_LIMIT_BYTES, FileError when missing)."""
        _rc, data = _h.hangar_sandbox_read_file(self._raw(), path)
        return bytes(data)

    def write_file(self, path: str, data: Union[bytes, bytearray, memoryview, str]) -> None:
        """Writes a whole file, creating its parents (str is written as UTF-8)."""
        _h.hangar_sandbox_write_file(self._raw(), path, data.encode() if isinstance(data, str) else data)

    def copy_in(self, local_path: PathLike, remote_path: str) -> None:
        """Copies a local file into the sandbox, streaming it."""
        _h.hangar_sandbox_copy_in(self._raw(), os.fspath(local_path), remote_path)

    def copy_out(self, remote_path: str, local_path: PathLike, *, limit: int = 0, timeout: int = 0,
                 cancel: Optional[Callable[[], bool]] = None) -> None:
        """Copies a file out of the sandbox; local_path appears only once it is complete."""
        _h.py_sandbox_copy_out(self._raw(), remote_path, os.fspath(local_path), limit, timeout, cancel)

    def list_files(self, path: str, depth: int = 1) -> Iterator[FileInfo]:
        """The entries of a directory, depth levels deep."""
        out: List[FileInfo] = []
        _h.py_sandbox_list_files(self._raw(), path, depth, 0, lambda d: out.append(FileInfo(**d)))
        return iter(out)

    def stat(self, path: str) -> FileInfo:
        """Describes one path (a symlink itself); FileError when missing."""
        out: List[FileInfo] = []
        _h.py_sandbox_list_files(self._raw(), path, 0, 1, lambda d: out.append(FileInfo(**d)))
        return out[0]

    def exists(self, path: str) -> bool:
        """Whether a path exists; a failure to find out raises, it is never False."""
        return bool(_h.hangar_sandbox_exists(self._raw(), path))

    def mkdir(self, path: str) -> None:
        """Creates a directory and its parents (ExistsError when it is there)."""
        _h.hangar_sandbox_mkdir(self._raw(), path)

    def rename(self, src: str, dst: str) -> None:
        """Renames src to dst, creating dst's parents; replaces an existing file (FileError when src is missing)."""
        _h.hangar_sandbox_rename(self._raw(), src, dst)

    def remove(self, path: str) -> None:
        """Removes a file or a whole tree; a missing path is not an error."""
        _h.hangar_sandbox_remove(self._raw(), path)

    # ---- lifecycle ----------------------------------------------------------------------

    def pause(self) -> None:
        """Pauses the sandbox keeping its memory (UnsupportedError where the provider cannot)."""
        _h.hangar_sandbox_pause(self._raw())

    def resume(self) -> None:
        """Resumes a paused sandbox: its processes continue, and its lifetime starts again
        from the timeout it was created with (UnsupportedError where the provider cannot pause)."""
        _h.hangar_sandbox_resume(self._raw())

    def pause_filesystem(self) -> None:
        """Pauses keeping only the filesystem: processes end, resume boots afresh."""
        _h.hangar_sandbox_pause_filesystem(self._raw())

    def set_timeout(self, seconds: int) -> None:
        """Sets the remaining lifetime from now (0: no limit)."""
        _h.hangar_sandbox_set_timeout(self._raw(), seconds)

    def kill(self) -> None:
        """Destroys the sandbox; the handle stays usable and calls on it raise GoneError."""
        _h.hangar_sandbox_kill(self._raw())

    def snapshot(self, name: Optional[str] = None) -> str:
        """Takes a persistent snapshot, usable as a template; returns its id."""
        _rc, sid = _h.hangar_sandbox_snapshot(self._raw(), name)
        return bytes(sid).decode()

    def fork(self, count: int = 1) -> List[ForkResult]:
        """Forks the sandbox natively (count new ones); each result holds a Sandbox or its error.

        Each new sandbox is the caller's as a created one is: a with-block
        on it kills it unless .keep() was called.
        """
        from .errors import _from_details

        out: List[ForkResult] = []

        def each(d: Any) -> None:
            err = None
            if d["error"]:
                err = _from_details({"code": d["error"], "name": "", "message": d["message"], "http_status": 0,
                                     "retry_after": 0, "os_errno": 0, "provider_code": "", "category": 0,
                                     "flags": 0})
            out.append(ForkResult(int(d["index"]),
                                  None if err else Sandbox._borrowed(self._ctx, d["sandbox"], keep=False), err))

        _h.py_sandbox_fork(self._raw(), count, each)
        return out

    def metrics(self) -> Iterator[Metric]:
        """Recent resource samples, oldest first."""
        out: List[Metric] = []
        _h.py_sandbox_metrics(self._raw(), lambda d: out.append(Metric(**d)))
        return iter(out)

    def logs(self) -> Iterator[LogEntry]:
        """The sandbox's platform log, oldest first."""
        out: List[LogEntry] = []
        _h.py_sandbox_logs(self._raw(), lambda d: out.append(LogEntry(**d)))
        return iter(out)

    def expose_port(self, port: int) -> str:
        """Makes a TCP port of the sandbox reachable; returns "host:port" or a host name."""
        _rc, addr = _h.hangar_sandbox_expose_port(self._raw(), port)
        return bytes(addr).decode()
