"""hangar.Sandbox: one sandbox on one provider."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator, List, Optional, Union, overload

from . import _hangar as _h
from ._types import (NETWORK_DEFAULT, NETWORK_OFF, NETWORK_ON, EnvdEndpoint, Env, ExecResult, FileInfo, LogEntry,
                     Metric, PortEndpoint, SandboxInfo, _pairs)
from .commands import Commands, Pty
from .context import Context, _Adopt, _context, _ctx_and_id, _Handle
from .errors import GoneError, _from_code
from .files import Files
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
        self._handle = _Handle(ptr, _h.hangar_sandbox_unref, "sandbox handle", ctx._cbs)
        self._ctx = ctx
        self._keep = keep
        self._id: str = _h.hangar_sandbox_id(ptr)

    @classmethod
    def _borrowed(cls, ctx: Context, ptr: Any, *, keep: bool = True) -> "Sandbox":
        return cls(ctx, _h.hangar_sandbox_ref(ptr), keep=keep)

    @classmethod
    def create(cls, ctx: Optional[Context] = None, *, provider: Optional[str] = None, template: Optional[str] = None,
               timeout: int = 0, env: Optional[Env] = None, network: Optional[bool] = None,
               tier: Optional[str] = None, environment: Optional[str] = None, keep: bool = False) -> "Sandbox":
        """Creates a sandbox and waits until it answers.

        provider: a provider name, else the tier (fast, isolated, default,
        heavy) picks one, falling back past full or unreachable ones.
        template: template or image id. timeout: lifetime in seconds (0:
        HANGAR_SANDBOX_TIMEOUT_SECONDS, negative: none). env: variables for
        every command. network: on/off (None: the provider's setting).
        environment: a name in HANGAR_ENVIRONMENTS_FILE filling what is
        left unset. keep: not killed when a with-block ends, nor when a
        context callback raises after the sandbox was made (the create
        raises that exception; without keep the sandbox is killed first).
        ctx: the context to create it in; None (or nothing) is the default
        context, made from the HANGAR_* environment on first use
        (hangar.default_context()).
        """
        ctx = _context(ctx)
        with _Adopt(Sandbox._discard) as own, ctx._handle as c:
            return own(cls(ctx, _h.py_sandbox_create(c, provider, template, timeout, _pairs(env),
                                                     _network(network), tier, environment), keep=keep))

    @overload
    @classmethod
    def attach(cls, ctx: str, *, provider: Optional[str] = None) -> "Sandbox": ...

    @overload
    @classmethod
    def attach(cls, ctx: Optional[Context], id: str, *, provider: Optional[str] = None) -> "Sandbox": ...

    @classmethod
    def attach(cls, ctx: Union[Context, str, None], id: Optional[str] = None, *,
               provider: Optional[str] = None) -> "Sandbox":
        """Attaches to an existing sandbox by id (GoneError when there is none); never killed by a with-block.

        Sandbox.attach(id) uses the default context, Sandbox.attach(ctx, id) ctx.
        """
        ctx, id = _ctx_and_id(ctx, id, "sandbox id")
        with _Adopt(Sandbox.close) as own, ctx._handle as c:
            _rc, ptr = _h.hangar_sandbox_attach(c, provider, id)
            return own(cls(ctx, ptr, keep=True))

    def _discard(self) -> None:
        """Undoes a create whose caller never got the sandbox: kills it unless kept."""
        try:
            if not self._keep:
                self.kill()
        finally:
            self.close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if not self._keep and not self._handle.closed:
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
        """Releases the handle (the sandbox lives on until killed or expired).

        Calls running on it on other threads finish first; new ones raise
        ValueError. Closing twice, or from several threads, is harmless.
        """
        handle = getattr(self, "_handle", None)
        if handle is not None:
            handle.close()

    def keep(self) -> "Sandbox":
        """Keeps the sandbox running when the with-block ends."""
        self._keep = True
        return self

    @property
    def context(self) -> Context:
        """The context the sandbox was created or attached in; the handle keeps it alive."""
        return self._ctx

    @property
    def id(self) -> str:
        """The sandbox's id."""
        return self._id

    @property
    def sandbox_id(self) -> str:
        """The sandbox's id (the E2B SDK's name for it)."""
        return self._id

    @property
    def provider(self) -> str:
        """The name of the sandbox's provider."""
        with self._handle as p:
            name: str = _h.py_sandbox_provider_name(p)
        return name

    def info(self) -> SandboxInfo:
        """Asks the provider for the sandbox's current state."""
        with self._handle as p:
            return SandboxInfo(**_h.py_sandbox_get_info(p))

    def envd_endpoint(self) -> EnvdEndpoint:
        """Where the sandbox's envd answers and what each request must carry, as last known.

        For callers that speak envd's protocol themselves (a proxy). The
        access token is the sandbox's own secret: never hand it to its users.
        Raises PausedError while the sandbox is paused.
        """
        with self._handle as p:
            url, socket_path, token, headers = _h.py_sandbox_envd_endpoint(p)
        return EnvdEndpoint(url=url, socket_path=socket_path, access_token=token, headers=list(headers))

    def port_endpoint(self, port: int) -> PortEndpoint:
        """Where a TCP port of the sandbox answers and what each request must carry, as last known.

        For a trusted caller that forwards requests itself (a proxy), on a
        platform that routes ports: the headers carry the platform's
        secret, never to be handed to the sandbox's users. Raises
        UnsupportedError where ports are exposed by expose_port() instead
        (local sandboxes), PausedError while the sandbox is paused.
        """
        with self._handle as p:
            url, headers = _h.py_sandbox_port_endpoint(p, port)
        return PortEndpoint(url=url, headers=list(headers))

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
        with self._handle as p:
            raw = _h.py_sandbox_exec(p, command, timeout, cwd, user, _pairs(env), output_limit, stdin,
                                     None if on_output is None else (lambda t, f=on_output: f(t[0], t[1])),
                                     cancel)
        return ExecResult._from_raw(raw)

    def start(self, command: Optional[str] = None, **kw: Any) -> Process:
        """Starts a background process: see Process.start()."""
        return Process.start(self, command, **kw)

    @property
    def commands(self) -> Commands:
        """Commands shaped as the E2B SDK's: sb.commands.run(cmd, ...)."""
        return Commands(self)

    @property
    def files(self) -> Files:
        """Files shaped as the E2B SDK's: sb.files.read(path), write, list, ..."""
        return Files(self)

    @property
    def pty(self) -> Pty:
        """Terminals shaped as the E2B SDK's: sb.pty.create(...)."""
        return Pty(self)

    # ---- files ------------------------------------------------------------------------

    def read_file(self, path: str) -> bytes:
        """A whole file's bytes (TooLargeError over HANGAR_READ_LIMIT_BYTES, FileError when missing)."""
        with self._handle as p:
            _rc, data = _h.hangar_sandbox_read_file(p, path)
        return bytes(data)

    def write_file(self, path: str, data: Union[bytes, bytearray, memoryview, str]) -> None:
        """Writes a whole file, creating its parents (str is written as UTF-8)."""
        with self._handle as p:
            _h.hangar_sandbox_write_file(p, path, data.encode() if isinstance(data, str) else data)

    def copy_in(self, local_path: PathLike, remote_path: str) -> None:
        """Copies a local file into the sandbox, streaming it."""
        with self._handle as p:
            _h.hangar_sandbox_copy_in(p, os.fspath(local_path), remote_path)

    def copy_out(self, remote_path: str, local_path: PathLike, *, limit: int = 0, timeout: int = 0,
                 cancel: Optional[Callable[[], bool]] = None) -> None:
        """Copies a file out of the sandbox; local_path appears only once it is complete."""
        with self._handle as p:
            _h.py_sandbox_copy_out(p, remote_path, os.fspath(local_path), limit, timeout, cancel)

    def list_files(self, path: str, depth: int = 1) -> Iterator[FileInfo]:
        """The entries of a directory, depth levels deep."""
        out: List[FileInfo] = []
        with self._handle as p:
            _h.py_sandbox_list_files(p, path, depth, 0, lambda d: out.append(FileInfo(**d)))
        return iter(out)

    def stat(self, path: str) -> FileInfo:
        """Describes one path (a symlink itself); FileError when missing."""
        out: List[FileInfo] = []
        with self._handle as p:
            _h.py_sandbox_list_files(p, path, 0, 1, lambda d: out.append(FileInfo(**d)))
        return out[0]

    def exists(self, path: str) -> bool:
        """Whether a path exists; a failure to find out raises, it is never False."""
        with self._handle as p:
            return bool(_h.hangar_sandbox_exists(p, path))

    def mkdir(self, path: str) -> None:
        """Creates a directory and its parents (ExistsError when it is there)."""
        with self._handle as p:
            _h.hangar_sandbox_mkdir(p, path)

    def rename(self, src: str, dst: str) -> None:
        """Renames src to dst, creating dst's parents; replaces an existing file (FileError when src is missing)."""
        with self._handle as p:
            _h.hangar_sandbox_rename(p, src, dst)

    def remove(self, path: str) -> None:
        """Removes a file or a whole tree; a missing path is not an error."""
        with self._handle as p:
            _h.hangar_sandbox_remove(p, path)

    # ---- lifecycle ----------------------------------------------------------------------

    def pause(self) -> None:
        """Pauses the sandbox keeping its memory (UnsupportedError where the provider cannot)."""
        with self._handle as p:
            _h.hangar_sandbox_pause(p)

    def resume(self) -> None:
        """Resumes a paused sandbox: its processes continue, and its lifetime starts again
        from the timeout it was created with (UnsupportedError where the provider cannot pause)."""
        with self._handle as p:
            _h.hangar_sandbox_resume(p)

    def pause_filesystem(self) -> None:
        """Pauses keeping only the filesystem: processes end, resume boots afresh."""
        with self._handle as p:
            _h.hangar_sandbox_pause_filesystem(p)

    def set_timeout(self, seconds: int) -> None:
        """Sets the remaining lifetime from now (0: no limit)."""
        with self._handle as p:
            _h.hangar_sandbox_set_timeout(p, seconds)

    def kill(self) -> None:
        """Destroys the sandbox; the handle stays usable and calls on it raise GoneError."""
        with self._handle as p:
            _h.hangar_sandbox_kill(p)

    def snapshot(self, name: Optional[str] = None) -> str:
        """Takes a persistent snapshot, usable as a template; returns its id."""
        with self._handle as p:
            _rc, sid = _h.hangar_sandbox_snapshot(p, name)
        return bytes(sid).decode()

    def fork(self, count: int = 1) -> List[ForkResult]:
        """Forks the sandbox natively (count new ones); each result holds a Sandbox or its error.

        Each new sandbox is the caller's as a created one is: a with-block
        on it kills it unless .keep() was called.
        """
        out: List[ForkResult] = []
        with _Adopt(Sandbox._discard) as own, self._handle as p:

            def each(d: Any) -> None:
                err = _from_code(d["error"], d["message"]) if d["error"] else None
                child = None if err else own(Sandbox._borrowed(self._ctx, d["sandbox"], keep=False))
                out.append(ForkResult(int(d["index"]), child, err))

            _h.py_sandbox_fork(p, count, each)
        return out

    def metrics(self) -> Iterator[Metric]:
        """Recent resource samples, oldest first."""
        out: List[Metric] = []
        with self._handle as p:
            _h.py_sandbox_metrics(p, lambda d: out.append(Metric(**d)))
        return iter(out)

    def logs(self) -> Iterator[LogEntry]:
        """The sandbox's platform log, oldest first."""
        out: List[LogEntry] = []
        with self._handle as p:
            _h.py_sandbox_logs(p, lambda d: out.append(LogEntry(**d)))
        return iter(out)

    def expose_port(self, port: int) -> str:
        """Makes a TCP port of the sandbox reachable; returns "host:port" or a host name."""
        with self._handle as p:
            _rc, addr = _h.hangar_sandbox_expose_port(p, port)
        return bytes(addr).decode()
