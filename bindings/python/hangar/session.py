"""hangar.Session: an agent's machine across turns, with hot resume."""

from __future__ import annotations

from typing import Any, Iterator, List, Optional

from . import _hangar as _h
from ._types import Env, Labels, SessionInfo, _pairs
from .context import Context
from .errors import HangarError, _from_details
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
        self._ctx = ctx
        self._ptr: Any = ptr
        self._id: str = _h.hangar_session_id(ptr)

    @classmethod
    def _borrowed(cls, ctx: Context, ptr: Any) -> "Session":
        return cls(ctx, _h.hangar_session_ref(ptr))

    @classmethod
    def create(cls, ctx: Context, *, id: Optional[str] = None, environment: Optional[str] = None,
               provider: Optional[str] = None, template: Optional[str] = None, timeout: int = 0,
               env: Optional[Env] = None, network: Optional[bool] = None, tier: Optional[str] = None,
               workspace: Optional[str] = None, user: Optional[str] = None, labels: Optional[Labels] = None,
               exclusive_credential: bool = False) -> "Session":
        """Creates a session and its first sandbox (as Sandbox.create() with these options)."""
        try:
            ptr = _h.py_session_create(ctx._raw(), id, environment, provider, template, timeout, _pairs(env),
                                       _network(network), tier, workspace, user, _pairs(labels),
                                       _EXCLUSIVE_CREDENTIAL if exclusive_credential else 0)
        finally:
            ctx._check_callbacks()
        return cls(ctx, ptr)

    @classmethod
    def open(cls, ctx: Context, id: str) -> "Session":
        """Opens a session by id (NotFoundError)."""
        _rc, ptr = _h.hangar_session_open(ctx._raw(), id)
        return cls(ctx, ptr)

    @classmethod
    def list(cls, ctx: Context) -> Iterator[SessionInfo]:
        """The sessions of the state store, oldest first."""
        out: List[SessionInfo] = []
        _h.py_session_list(ctx._raw(), lambda d: out.append(SessionInfo._from_raw(d)))
        return iter(out)

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<hangar.Session {self._id}>"

    def close(self) -> None:
        """Releases the handle; the session and its sandbox stay as they are."""
        ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr is not None:
            _h.hangar_session_unref(ptr)

    def _raw(self) -> Any:
        if self._ptr is None:
            raise ValueError("the session handle is closed")
        return self._ptr

    @property
    def id(self) -> str:
        """The session's id."""
        return self._id

    def info(self) -> SessionInfo:
        """Reads the session's record again and describes it (NotFoundError once deleted)."""
        return SessionInfo._from_raw(_h.py_session_get_info(self._raw()))

    def sandbox(self) -> Sandbox:
        """The live sandbox, resuming the session first when it is not active."""
        try:
            _rc, ptr = _h.hangar_session_sandbox(self._raw())
        finally:
            self._ctx._check_callbacks()
        return Sandbox(self._ctx, ptr, keep=True)

    def suspend(self, *, blob: Optional[bytes] = None, labels: Optional[Labels] = None, park: bool = True,
                timeout: int = 0) -> None:
        """Checkpoints the workspace (with blob), then parks the sandbox where allowed, else destroys it."""
        try:
            _h.py_session_suspend(self._raw(), blob, _pairs(labels), 0 if park else _SUSPEND_NO_PARK, timeout)
        finally:
            self._ctx._check_callbacks()

    def resume(self) -> Sandbox:
        """Brings the session back (hot when the parked sandbox can be trusted, else cold)."""
        try:
            _rc, ptr = _h.hangar_session_resume(self._raw())
        finally:
            self._ctx._check_callbacks()
        return Sandbox(self._ctx, ptr, keep=True)

    def archive(self) -> None:
        """Destroys its sandbox and keeps its record and checkpoints; it cannot be resumed."""
        _h.hangar_session_archive(self._raw())

    def delete(self) -> None:
        """Destroys its sandbox, deletes its checkpoints and its record."""
        _h.hangar_session_delete(self._raw())

    def fork(self, count: int = 1) -> List[SessionForkResult]:
        """Forks count new sessions from this one's current state."""
        out: List[SessionForkResult] = []

        def each(d: Any) -> None:
            err = None
            if d["error"]:
                err = _from_details({"code": d["error"], "name": "", "message": d["message"], "http_status": 0,
                                     "retry_after": 0, "os_errno": 0, "provider_code": "", "category": 0,
                                     "flags": 0})
            out.append(SessionForkResult(int(d["index"]), int(d["method"]),
                                         None if err else Session._borrowed(self._ctx, d["session"]), err))

        try:
            _h.py_session_fork(self._raw(), count, each)
        finally:
            self._ctx._check_callbacks()
        return out

    def keep(self) -> int:
        """Keeps this fork and archives the others of its fork group; returns how many."""
        _rc, n = _h.hangar_session_keep(self._raw())
        return int(n)
