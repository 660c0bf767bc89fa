"""hangar.Session: an agent's machine across turns, with hot resume."""

from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional, Tuple, Union, overload

from . import _hangar as _h
from . import context as _context_module
from ._types import Env, Labels, SessionInfo, _pairs
from .context import Context, _Adopt, _context, _ctx_and_id, _Handle
from .errors import HangarError, _from_code
from .sandbox import Sandbox, _network

_EXCLUSIVE_CREDENTIAL = 1
_SUSPEND_NO_PARK = 1


class SessionForkResult:
    """One fork of Session.fork(): a session and how it was made, or its error."""

    def __init__(self, index: int, method: int, session: Optional["Session"],
                 error: Optional[HangarError]) -> None:
        self.index = index
        self.method = method
        self.session = session
        self.error = error


class Session:
    """A session handle. Releasing it never changes the session; archive() and delete() do."""

    def __init__(self, ctx: Context, ptr: Any) -> None:
        self._handle = _Handle(ptr, _h.hangar_session_unref, "session handle", ctx._cbs)
        self._ctx = ctx
        self._id: str = _h.hangar_session_id(ptr)

    @classmethod
    def _borrowed(cls, ctx: Context, ptr: Any) -> "Session":
        return cls(ctx, _h.hangar_session_ref(ptr))

    @classmethod
    def create(cls, ctx: Optional[Context] = None, *, id: Optional[str] = None, environment: Optional[str] = None,
               provider: Optional[str] = None, template: Optional[str] = None, timeout: int = 0,
               env: Optional[Env] = None, network: Optional[bool] = None, tier: Optional[str] = None,
               workspace: Optional[str] = None, user: Optional[str] = None, labels: Optional[Labels] = None,
               exclusive_credential: bool = False) -> "Session":
        """Creates a session and its first sandbox (as Sandbox.create() with these options).

        When a context callback raises after the session was made, it is
        deleted (its sandbox with it) before the exception goes on. ctx
        None (or nothing) is the default context (hangar.default_context()).
        """
        ctx = _context(ctx)
        with _Adopt(Session._discard) as own, ctx._handle as c:
            return own(cls(ctx, _h.py_session_create(c, id, environment, provider, template, timeout, _pairs(env),
                                                     _network(network), tier, workspace, user, _pairs(labels),
                                                     _EXCLUSIVE_CREDENTIAL if exclusive_credential else 0)))

    @overload
    @classmethod
    def open(cls, ctx: str) -> "Session": ...

    @overload
    @classmethod
    def open(cls, ctx: Optional[Context], id: str) -> "Session": ...

    @classmethod
    def open(cls, ctx: Union[Context, str, None], id: Optional[str] = None) -> "Session":
        """Opens a session by id (NotFoundError): Session.open(id) in the default context, or open(ctx, id)."""
        ctx, id = _ctx_and_id(ctx, id, "session id")
        with _Adopt(Session.close) as own, ctx._handle as c:
            _rc, ptr = _h.hangar_session_open(c, id)
            return own(cls(ctx, ptr))

    @classmethod
    def list(cls, ctx: Optional[Context] = None) -> Iterator[SessionInfo]:
        """The sessions of the state store, oldest first (ctx None: the default context's)."""
        ctx = _context(ctx)
        out: List[SessionInfo] = []
        with ctx._handle as c:
            _h.py_session_list(c, lambda d: out.append(SessionInfo._from_raw(d)))
        return iter(out)

    def _discard(self) -> None:
        """Undoes a create or fork whose caller never got the session."""
        try:
            self.delete()
        finally:
            self.close()

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<hangar.Session {self._id}>"

    def close(self) -> None:
        """Releases the handle; the session and its sandbox stay as they are.

        Calls running on it on other threads finish first; new ones raise
        ValueError. Closing twice, or from several threads, is harmless.
        """
        handle = getattr(self, "_handle", None)
        if handle is not None:
            handle.close()

    @property
    def id(self) -> str:
        """The session's id."""
        return self._id

    def info(self) -> SessionInfo:
        """Reads the session's record again and describes it (NotFoundError once deleted)."""
        with self._handle as p:
            return SessionInfo._from_raw(_h.py_session_get_info(p))

    def sandbox(self) -> Sandbox:
        """The live sandbox, resuming the session first when it is not active."""
        with _Adopt(Sandbox.close) as own, self._handle as p:
            _rc, ptr = _h.hangar_session_sandbox(p)
            return own(Sandbox(self._ctx, ptr, keep=True))

    def suspend(self, *, blob: Optional[bytes] = None, labels: Optional[Labels] = None, park: bool = True,
                timeout: int = 0) -> None:
        """Checkpoints the workspace (with blob), then parks the sandbox where allowed, else destroys it."""
        with self._handle as p:
            _h.py_session_suspend(p, blob, _pairs(labels), 0 if park else _SUSPEND_NO_PARK, timeout)

    def resume(self) -> Sandbox:
        """Brings the session back (hot when the parked sandbox can be trusted, else cold)."""
        with _Adopt(Sandbox.close) as own, self._handle as p:
            _rc, ptr = _h.hangar_session_resume(p)
            return own(Sandbox(self._ctx, ptr, keep=True))

    def archive(self) -> None:
        """Destroys its sandbox and keeps its record and checkpoints; it cannot be resumed."""
        with self._handle as p:
            _h.hangar_session_archive(p)

    def delete(self) -> None:
        """Destroys its sandbox, deletes its checkpoints and its record."""
        with self._handle as p:
            _h.hangar_session_delete(p)

    def fork(self, count: int = 1, *, cancel: Optional[Callable[[], bool]] = None) -> List[SessionForkResult]:
        """Forks count new sessions from this one's current state.

        cancel, if given, is asked while the fork runs (on the calling
        thread); a true answer gives the fork up and raises CanceledError:
        nothing is kept (no session, sandbox or checkpoint of the fork) and
        this session stays active.
        """
        out: List[SessionForkResult] = []
        with _Adopt(Session._discard) as own, self._handle as p:

            def each(d: Any) -> None:
                err = _from_code(d["error"], d["message"]) if d["error"] else None
                child = None if err else own(Session._borrowed(self._ctx, d["session"]))
                out.append(SessionForkResult(int(d["index"]), int(d["method"]), child, err))

            _h.py_session_fork(p, count, each, cancel)
        return out

    def keep(self) -> int:
        """Keeps this fork and archives the others of its fork group; returns how many."""
        with self._handle as p:
            _rc, n = _h.hangar_session_keep(p)
        return int(n)


def _hook_objects(ctx: Context, session: Any, sandbox: Any) -> Tuple[Session, Sandbox]:
    return Session._borrowed(ctx, session), Sandbox._borrowed(ctx, sandbox)


_context_module._hook_objects = _hook_objects
