"""hangar.Checkpoint: a sandbox's workspace, captured, sealed and stored."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator, List, Optional, Union, overload

from . import _hangar as _h
from ._types import CheckpointInfo, Labels, _pairs
from .context import Context, _Adopt, _context, _ctx_and_id, _Handle
from .sandbox import Sandbox

Progress = Callable[[int, int], Optional[bool]]

_SELECT_ALL = 1
_NO_NATIVE = 1
_RESTORE_MERGE = 1
_RESTORE_NO_NATIVE = 2


def _progress(fn: Optional[Progress]) -> Optional[Callable[[Any], int]]:
    if fn is None:
        return None
    user = fn
    # Returning True cancels (CanceledError).
    return lambda t: 1 if user(int(t[0]), int(t[1])) else 0


class Checkpoint:
    """A checkpoint (its index entry). Releasing it never deletes it: delete() does."""

    def __init__(self, ctx: Context, ptr: Any) -> None:
        self._handle = _Handle(ptr, _h.hangar_checkpoint_unref, "checkpoint handle", ctx._cbs)
        self._ctx = ctx
        self._id: str = _h.hangar_checkpoint_id(ptr)

    @classmethod
    def create(cls, sb: Sandbox, *, workspace: Optional[str] = None, select_all: bool = False,
               native: bool = True, session_id: Optional[str] = None, parent_id: Optional[str] = None,
               blob: Optional[bytes] = None, labels: Optional[Labels] = None, user: Optional[str] = None,
               timeout: int = 0, progress: Optional[Progress] = None) -> "Checkpoint":
        """Captures sb's workspace (a git repository's tracked and untracked files unless select_all),
        seals it with blob (your bytes, e.g. a conversation), stores and indexes it."""
        with _Adopt(Checkpoint.close) as own, sb._handle as p:
            return own(cls(sb.context, _h.py_checkpoint_create(
                p, workspace, _SELECT_ALL if select_all else 0, 0 if native else _NO_NATIVE, session_id, parent_id,
                blob, _pairs(labels), user, timeout, _progress(progress))))

    @overload
    @classmethod
    def lookup(cls, ctx: str) -> "Checkpoint": ...

    @overload
    @classmethod
    def lookup(cls, ctx: Optional[Context], id: str) -> "Checkpoint": ...

    @classmethod
    def lookup(cls, ctx: Union[Context, str, None], id: Optional[str] = None) -> "Checkpoint":
        """Finds a checkpoint by id (NotFoundError): lookup(id) in the default context, or lookup(ctx, id)."""
        ctx, id = _ctx_and_id(ctx, id, "checkpoint id")
        with _Adopt(Checkpoint.close) as own, ctx._handle as c:
            _rc, ptr = _h.hangar_checkpoint_lookup(c, id)
            return own(cls(ctx, ptr))

    @classmethod
    def list(cls, ctx: Optional[Context] = None, session_id: Optional[str] = None) -> Iterator["Checkpoint"]:
        """The index, oldest first; only one session's with session_id (ctx None: the default context)."""
        in_ctx = _context(ctx)
        with _Adopt(Checkpoint.close) as own, in_ctx._handle as c:

            def each(p: Any) -> None:
                own(cls(in_ctx, _h.hangar_checkpoint_ref(p)))

            _h.py_checkpoint_list(c, session_id, each)
        return iter(own.made)

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> "Checkpoint":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<hangar.Checkpoint {self._id}>"

    def close(self) -> None:
        """Releases the handle; the checkpoint stays stored.

        Calls running on it on other threads finish first; new ones raise
        ValueError. Closing twice, or from several threads, is harmless.
        """
        handle = getattr(self, "_handle", None)
        if handle is not None:
            handle.close()

    @property
    def id(self) -> str:
        """The checkpoint's id ("ckpt-" and 26 lowercase base32 characters)."""
        return self._id

    def info(self) -> CheckpointInfo:
        """What the index says about the checkpoint."""
        with self._handle as p:
            return CheckpointInfo._from_raw(_h.py_checkpoint_get_info(p))

    def read_blob(self) -> bytes:
        """The blob sealed with it, verified (RefusedError when altered); b"" when none."""
        with self._handle as p:
            _rc, data = _h.hangar_checkpoint_read_blob(p)
        return bytes(data)

    def delete(self) -> None:
        """Deletes the stored checkpoint and its index entry."""
        with self._handle as p:
            _h.hangar_checkpoint_delete(p)

    def restore(self, sb: Sandbox, *, workspace: Optional[str] = None, merge: bool = False, native: bool = True,
                user: Optional[str] = None, timeout: int = 0, progress: Optional[Progress] = None) -> None:
        """Restores into sb, replacing the workspace (or merging); a failure leaves it as it was."""
        flags = (1 if merge else 0) | (0 if native else _RESTORE_NO_NATIVE)
        with sb._handle as s, self._handle as p:
            _h.py_checkpoint_restore(s, p, None, workspace, flags, user, timeout, _progress(progress))

    def export(self, local_path: Union[str, "os.PathLike[str]"], *, timeout: int = 0,
               progress: Optional[Progress] = None) -> None:
        """Writes the checkpoint as a plain tar.zst file, only once verified whole."""
        with self._handle as p:
            _h.py_checkpoint_restore(None, p, os.fspath(local_path), None, 0, None, timeout, _progress(progress))
