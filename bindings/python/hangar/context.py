"""hangar.Context: settings, providers, and the callbacks of the library."""

from __future__ import annotations

import atexit
import json
import threading
import weakref
from typing import Any, Callable, Dict, Generic, Iterator, List, Mapping, Optional, Tuple, TypeVar

from . import _hangar as _h
from ._types import (LOG_INFO, EnvironmentInfo, ImageInfo, ImageProgress, ProviderInfo, PublishResult, ReapResult,
                     SandboxInfo, Setting, SnapshotInfo, TemplateInfo, TierInfo)

EventCallback = Callable[[str, Dict[str, Any]], None]
LogCallback = Callable[[int, str], None]


_T = TypeVar("_T")

# Exceptions a callback raises again before its first one reached a caller
# ride along on that one as notes, up to this many (then a count).
_MAX_NOTES = 8


class _Holder:
    """A Python callable the library keeps calling after the call that set it."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.ptr: Any = _h.pycb_new(fn)
        # The thread the callable last ran on, where the caller records it.
        self.thread: Optional[List[int]] = None

    def check(self) -> None:
        """Raises what the callable raised since the last check."""
        _h.pycb_check(self.ptr)

    def free(self) -> None:
        if self.ptr is not None:
            _h.pycb_free(self.ptr)
            self.ptr = None


class _Pending:
    """What a context's callbacks raised for one thread, not raised yet."""

    def __init__(self, first: BaseException) -> None:
        self.first = first
        self.later: List[BaseException] = []
        self.more = 0

    def add(self, e: BaseException) -> None:
        if len(self.later) < _MAX_NOTES:
            self.later.append(e)
        else:
            self.more += 1

    def exception(self) -> BaseException:
        for e in self.later:
            self.first.add_note(f"hangar: the callback raised again: {type(e).__name__}: {e}")
        if self.more:
            self.first.add_note(f"hangar: and {self.more} more times")
        return self.first


class _Callbacks:
    """A context's on_event, on_log and session hook, and what they raised.

    The library calls them on the thread where the event happens: the one
    running a call on the context or on a handle of it, or a thread of the
    library's own. An exception raised on a thread that is in such a call
    is raised by that call as it returns; one raised anywhere else, by the
    next call on the context to return, on any thread. Either way the
    callback goes on getting every later event and log line, and what it
    raises before its first exception reached a caller becomes notes on
    that one. None of this refers to the Context, which the library's
    references to the callbacks would otherwise keep from being collected.
    """

    def __init__(self) -> None:
        self.holders: List[_Holder] = []
        self.hook: Optional[_Holder] = None
        # Hooks replaced while the library may still be calling them.
        self.retired: List[_Holder] = []
        self.lock = threading.RLock()
        self.pending: Dict[Optional[int], _Pending] = {}
        self.calls = threading.local()

    def wrap(self, fn: Callable[[Any], Any], failed: Any) -> Callable[[Any], Any]:
        """fn for the library: what it raises is kept, and failed returned instead."""

        def call(args: Any) -> Any:
            try:
                return fn(args)
            except BaseException as e:
                self.keep(e)
                return failed

        return call

    def keep(self, e: BaseException) -> None:
        key = threading.get_ident() if getattr(self.calls, "depth", 0) else None
        with self.lock:
            p = self.pending.get(key)
            if p is None:
                self.pending[key] = _Pending(e)
            else:
                p.add(e)

    def enter(self) -> None:
        self.calls.depth = getattr(self.calls, "depth", 0) + 1

    def leave(self) -> None:
        self.calls.depth -= 1

    def check(self) -> None:
        """Raises what a callback raised for this thread, or on no caller's thread."""
        for h in self.holders:
            h.check()
        if self.pending:
            with self.lock:
                p = self.pending.pop(threading.get_ident(), None) or self.pending.pop(None, None)
            if p is not None:
                raise p.exception()

    def undelivered(self) -> Optional[BaseException]:
        with self.lock:
            ps = list(self.pending.values())
            self.pending.clear()
        return ps[0].exception() if ps else None

    def release(self, ptr: Any) -> None:
        """Releases the context: the callbacks stop before their holders go."""
        _h.py_ctx_set_event(ptr, None)
        _h.py_ctx_set_log(ptr, 0, None)
        _h.py_session_set_hook(ptr, None)
        _h.hangar_ctx_unref(ptr)
        for h in self.holders + self.retired + ([self.hook] if self.hook is not None else []):
            h.free()
        self.holders, self.retired, self.hook = [], [], None


class _Handle:
    """The one C reference of a Python object, and the calls running on it.

    Every call on the object runs as `with obj._handle as ptr:` and on its
    way out raises what the context's callbacks raised meanwhile. close()
    may come from any thread while calls run on others with the GIL
    released: it refuses new calls at once, and the reference is dropped by
    whichever of close() and the last running call comes last, exactly once.
    """

    __slots__ = ("ptr", "closed", "_release", "_what", "_cbs", "_lock", "_busy")

    def __init__(self, ptr: Any, release: Callable[[Any], Any], what: str, cbs: _Callbacks) -> None:
        self.ptr = ptr
        self.closed = False
        self._release = release
        self._what = what
        self._cbs = cbs
        self._lock = threading.Lock()
        self._busy = 0

    def __enter__(self) -> Any:
        with self._lock:
            if self.closed:
                raise ValueError(f"the {self._what} is closed")
            self._busy += 1
        self._cbs.enter()
        return self.ptr

    def __exit__(self, *exc: object) -> None:
        self._cbs.leave()
        with self._lock:
            self._busy -= 1
            ptr = self.ptr
            last = self.closed and self._busy == 0 and ptr is not None
            if last:
                self.ptr = None
        if last:
            self._release(ptr)
        self._cbs.check()

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._busy:
                return  # the last call running on it releases it
            ptr, self.ptr = self.ptr, None
        if ptr is not None:
            self._release(ptr)


class _Adopt(Generic[_T]):
    """The objects a call made, undone if the call raises after making them.

    The C call may succeed and a callback raise after it: the caller then
    never gets what was made. `with _Adopt(undo) as own, x._handle as ptr:`
    with own(obj) around each new owner runs undo(obj) (kill, delete or
    close) before the exception goes on, so nothing is left without one.
    """

    def __init__(self, undo: Callable[[_T], None]) -> None:
        self.made: List[_T] = []
        self._undo = undo

    def __call__(self, obj: _T) -> _T:
        self.made.append(obj)
        return obj

    def __enter__(self) -> "_Adopt[_T]":
        return self

    def __exit__(self, et: object, e: Optional[BaseException], tb: object) -> None:
        if e is None:
            return
        for obj in self.made:
            try:
                self._undo(obj)
            except BaseException as u:
                e.add_note(f"hangar: undoing what the call made ({obj!r}) failed: {type(u).__name__}: {u}")


# Turns the raw handles the session hook receives into a Session and a
# Sandbox (each with a reference of its own). The session module sets it as
# it loads: this module is below the ones defining those classes and
# imports neither.
_hook_objects: Optional[Callable[["Context", Any, Any], Tuple[Any, Any]]] = None


class Context:
    """A library context: the HANGAR_* settings, the providers, and callbacks.

    Context() reads the HANGAR_* environment variables (use_environment=False
    starts from defaults); settings= overrides some, each validated as it is
    set: a wrong value raises ConfigError naming the variable.

    on_event(name, details) receives audit events ("sandbox.created",
    "sandbox.killed", "sandbox.tier_fallback", ...; see
    hangar_ctx_set_event(3)), on_log(level, message) log lines up to
    log_level. Both run on the thread where the event happens, the caller's
    or one of the library's. An exception either raises (or the session
    hook) is raised by the call it happened in, as that call returns: the
    kill() or with-block that fired "sandbox.killed", the create that fired
    "sandbox.created". One raised on a library thread outside any call is
    raised by the next call on this context or a handle of it. The
    callback is not cut off: it gets every later event and line, and what
    it raises before its first exception was raised is added to that one
    as notes. When a create (or attach, open, fork, resume) succeeded in C
    and then raises so, what it made is killed (a created sandbox, unless
    keep=True), deleted (a created session) or released first.

    Sandboxes, sessions and checkpoints keep their context alive: it is
    released when the last of them is.
    """

    def __init__(self, settings: Optional[Mapping[str, Optional[str]]] = None, *, use_environment: bool = True,
                 on_event: Optional[EventCallback] = None, on_log: Optional[LogCallback] = None,
                 log_level: int = LOG_INFO) -> None:
        self._cbs = cbs = _Callbacks()
        _rc, ptr = _h.hangar_ctx_new(0 if use_environment else 1)
        self._handle = _Handle(ptr, cbs.release, "context", cbs)
        for name, value in (settings or {}).items():
            self.set(name, value)
        if on_event is not None:
            ev = on_event

            def event(args: Any) -> None:
                name, data = args
                ev(name, json.loads(data) if data else {})

            h = _Holder(cbs.wrap(event, None))
            cbs.holders.append(h)
            _h.py_ctx_set_event(ptr, h.ptr)
        if on_log is not None:
            lg = on_log

            def log(args: Any) -> None:
                lg(args[0], args[1])

            h = _Holder(cbs.wrap(log, None))
            cbs.holders.append(h)
            _h.py_ctx_set_log(ptr, log_level, h.ptr)

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is None:
            return
        handle.close()
        e = self._cbs.undelivered()
        if e is not None:
            # Nothing is left to raise it: Python reports it as unraisable.
            raise e

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    # ---- settings -------------------------------------------------------------------

    def set(self, name: str, value: Optional[str]) -> None:
        """Overrides one setting (None restores its default); ConfigError names a bad value."""
        with self._handle as c:
            _h.hangar_ctx_set(c, name, value)

    def get(self, name: str) -> str:
        """The effective value of a setting ("" when unset). Secrets come back in clear."""
        with self._handle as c:
            _rc, value = _h.hangar_ctx_get(c, name)
        return bytes(value).decode("utf-8", "surrogateescape")

    def settings(self, provider: Optional[str] = None, *, all: bool = True) -> Iterator[Setting]:
        """Every setting, secrets masked: the library's then each provider's.

        With all=False, only the library's own (provider None) or one provider's.
        """
        out: List[Setting] = []
        with self._handle as c:
            _h.py_ctx_settings(c, provider, 1 if all and provider is None else 0,
                               lambda t: out.append(Setting(t[0], t[1], t[2])))
        return iter(out)

    # ---- providers, tiers, environments, templates ------------------------------------

    def providers(self) -> Iterator[ProviderInfo]:
        """The registered providers, built-in first."""
        out: List[ProviderInfo] = []
        with self._handle as c:
            _h.py_provider_foreach(c, lambda p: out.append(
                ProviderInfo(_h.hangar_provider_name(p), int(_h.hangar_provider_capabilities(p)))))
        return iter(out)

    def provider(self, name: Optional[str] = None) -> ProviderInfo:
        """One provider by name (None: HANGAR_DEFAULT_PROVIDER), set up; NotFoundError if none."""
        with self._handle as c:
            _rc, p = _h.hangar_provider_lookup(c, name)
            try:
                return ProviderInfo(_h.hangar_provider_name(p), int(_h.hangar_provider_capabilities(p)))
            finally:
                _h.hangar_provider_unref(p)

    def tiers(self) -> Iterator[TierInfo]:
        """The four tiers (fast, isolated, default, heavy) with their providers and cooldowns."""
        out: List[TierInfo] = []
        with self._handle as c:
            _h.py_tier_foreach(c, lambda d: out.append(TierInfo(**d)))
        return iter(out)

    def environments(self) -> Iterator[EnvironmentInfo]:
        """The environments of HANGAR_ENVIRONMENTS_FILE, sorted by name."""
        out: List[EnvironmentInfo] = []
        with self._handle as c:
            _h.py_environment_list(c, None, lambda d: out.append(EnvironmentInfo._from_raw(d)))
        return iter(out)

    def environment(self, name: str) -> EnvironmentInfo:
        """One environment; NotFoundError when there is none of that name."""
        out: List[EnvironmentInfo] = []
        with self._handle as c:
            _h.py_environment_list(c, name, lambda d: out.append(EnvironmentInfo._from_raw(d)))
        return out[0]

    def publish_environment(self, name: str, *, rebuild: bool = False,
                            progress: Optional[Callable[[str, str], None]] = None) -> List[PublishResult]:
        """Makes what environment name's image needs on every provider of its tier.

        One result per provider, in the tier's order: action "built" (a
        template built from the image now), "reused" (one built before from
        the same image), "named" (the environment names a template for it),
        "image" (the provider runs the image itself) or "failed" (error says
        why; the other providers are still done). rebuild builds templates
        again where one exists. progress gets each build's (status, message).
        """
        out: List[PublishResult] = []
        cb = None if progress is None else (lambda t, p=progress: p(t[0], t[1]))
        with self._handle as c:
            _h.py_environment_publish(c, name, 1 if rebuild else 0,
                                      lambda d: out.append(PublishResult._from_raw(d)), cb)
        return out

    def delete_snapshot(self, snapshot_id: str, provider: Optional[str] = None) -> None:
        """Deletes a snapshot Sandbox.snapshot() took (BusyError while a sandbox made from it runs)."""
        with self._handle as c:
            _h.hangar_snapshot_delete(c, provider, snapshot_id)

    def release_snapshot(self, snapshot_id: str, provider: Optional[str] = None) -> None:
        """Deletes a snapshot once no sandbox made from it runs: now, or when the last one ends."""
        with self._handle as c:
            _h.hangar_snapshot_release(c, provider, snapshot_id)

    def snapshots(self, provider: Optional[str] = None) -> Iterator[SnapshotInfo]:
        """The snapshots a provider keeps, oldest first (UnsupportedError where it lists none)."""
        out: List[SnapshotInfo] = []
        with self._handle as c:
            _h.py_snapshot_list(c, provider, lambda d: out.append(SnapshotInfo(**d)))
        return iter(out)

    def templates(self, provider: Optional[str] = None) -> Iterator[TemplateInfo]:
        """The templates a provider can create sandboxes from (UnsupportedError where it has none)."""
        out: List[TemplateInfo] = []
        with self._handle as c:
            _h.py_template_list(c, provider, lambda d: out.append(TemplateInfo(**d)))
        return iter(out)

    def build_template(self, name: str, image: str, *, provider: Optional[str] = None, cpu_millis: int = 0,
                       memory_mb: int = 0, disk_mb: int = 0,
                       progress: Optional[Callable[[str, str], None]] = None) -> str:
        """Builds a template from an OCI image and waits until it is ready; returns its id."""
        cb = None if progress is None else (lambda t, p=progress: p(t[0], t[1]))
        with self._handle as c:
            tid: str = _h.py_template_build(c, provider, name, image, cpu_millis, memory_mb, disk_mb, cb)
        return tid

    # ---- the local image store ----------------------------------------------------------

    def import_image(self, path: str, *, name: Optional[str] = None,
                     progress: Optional[Callable[[ImageProgress], object]] = None) -> str:
        """Imports an OCI layout, a docker/podman save archive or a rootfs tarball; returns its digest.

        name is required for a rootfs tarball; progress receives an
        ImageProgress as layers are unpacked, and a true result cancels
        (CanceledError). Hostile content raises RefusedError naming the
        member or blob; see hangar_image_import(3).
        """
        cb = None if progress is None else (lambda t, p=progress: p(ImageProgress(*t)))
        with self._handle as c:
            digest: str = _h.py_image_import(c, path, name, cb)
        return digest

    def pull_image(self, reference: str, *, progress: Optional[Callable[[ImageProgress], object]] = None,
                   cancel: Optional[Callable[[], bool]] = None) -> str:
        """Pulls an image from its registry into the local store; returns its digest.

        reference is [REGISTRY/]NAME[:TAG|@sha256:HEX] (docker.io by
        default); the store names the image by it, normalised. progress
        receives an ImageProgress per blob as it arrives (phase "download"),
        then as layers are unpacked; a true result from it or from cancel
        gives the pull up (CanceledError). See hangar_image_pull(3).
        """
        cb = None if progress is None else (lambda t, p=progress: p(ImageProgress(*t)))
        with self._handle as c:
            digest: str = _h.py_image_pull(c, reference, cb, cancel)
        return digest

    def images(self) -> Iterator[ImageInfo]:
        """The images of the local store, newest first."""
        out: List[ImageInfo] = []
        with self._handle as c:
            _h.py_image_list(c, None, lambda d: out.append(ImageInfo(**d)))
        return iter(out)

    def image(self, ref: str) -> ImageInfo:
        """One image, by name, sha256:<hex> or a 12-digit prefix; NotFoundError when there is none."""
        out: List[ImageInfo] = []
        with self._handle as c:
            _h.py_image_list(c, ref, lambda d: out.append(ImageInfo(**d)))
        return out[0]

    def remove_image(self, ref: str) -> None:
        """Removes an image and its names (BusyError while a sandbox uses it)."""
        with self._handle as c:
            _h.hangar_image_remove(c, ref)

    def gc_images(self, max_bytes: int = 0) -> int:
        """Collects the store's garbage, then keeps it under max_bytes (0: HANGAR_IMAGE_CACHE_MB); returns bytes freed."""
        with self._handle as c:
            freed: int = _h.py_image_gc(c, max_bytes)
        return freed

    # ---- sandboxes and sessions ---------------------------------------------------------

    def sandboxes(self, provider: Optional[str] = None) -> Iterator[SandboxInfo]:
        """The sandboxes of one provider, or of every one that answers (provider None)."""
        out: List[SandboxInfo] = []
        with self._handle as c:
            _h.py_sandbox_list(c, provider, lambda d: out.append(SandboxInfo(**d)))
        return iter(out)

    def set_session_hook(self, fn: Optional[Callable[[Any, Any, int], bool]]) -> None:
        """Sets the hook called as fn(session, sandbox, hook) on park, wake and cold resumes.

        Return True (or None) to go on, False to refuse; see hangar_session_set_hook(3).
        An exception it raises refuses too, and is raised by the suspend or
        resume it ran in.
        """
        assert _hook_objects is not None, "hangar.session registers the hook's objects when the package loads"
        objects = _hook_objects
        cbs = self._cbs
        new = None
        if fn is not None:
            user = fn
            # The library holds the hook, where the garbage collector cannot
            # see it: a reference to the context would keep it forever.
            me = weakref.ref(self)

            def hook(t: Any) -> int:
                ctx = me()
                if ctx is None:
                    return 0
                s, sb = objects(ctx, t[0], t[1])
                try:
                    r = user(s, sb, int(t[2]))
                finally:
                    s.close()
                    sb.close()
                return 0 if r is None or r else 1

            new = _Holder(cbs.wrap(hook, 1))
        with self._handle as c:
            _h.py_session_set_hook(c, None if new is None else new.ptr)
            with cbs.lock:
                # A suspend on another thread may still be in the old hook:
                # it is freed with the context.
                if cbs.hook is not None:
                    cbs.retired.append(cbs.hook)
                cbs.hook = new

    def reap(self) -> int:
        """Destroys sandboxes parked too long; returns how many (hangar_session_reap(3))."""
        with self._handle as c:
            _rc, n = _h.hangar_session_reap(c)
        return int(n)

    def reap_as_leader(self, lease: str, lease_seconds: int) -> ReapResult:
        """One reaping pass, only in the context holding the store's lease named lease
        (hangar_ctx_reap(3)): processes sharing a store call it periodically, one reaps."""
        with self._handle as c:
            return ReapResult(**_h.py_ctx_reap(c, lease, lease_seconds))

    def release_lease(self, lease: str) -> bool:
        """Gives the reaper's lease up if this context holds it; True when it did."""
        with self._handle as c:
            _rc, released = _h.hangar_ctx_reap_release(c, lease)
        return bool(released)

    def ping_store(self) -> None:
        """Checks that the state store answers now (for readiness probes); raises if not."""
        with self._handle as c:
            _h.hangar_ctx_ping_store(c)


_default: Optional[Context] = None
_default_lock = threading.Lock()


def default_context() -> Context:
    """The context of every call given none: made on first use, then shared.

    It reads the HANGAR_* environment variables once, when the first call
    that needs it runs (Sandbox.create() without a context, say); a wrong
    value raises ConfigError naming the variable, from that call and from
    every later one until the environment is fixed (a failure is not
    kept). It is safe to use from several threads at once, like any
    Context; changing its settings with set() is not, while other threads
    use it. A Context passed explicitly is always used instead.
    """
    global _default
    ctx = _default
    if ctx is None:
        with _default_lock:
            if _default is None:
                _default = Context()
            ctx = _default
    return ctx


@atexit.register
def _release_default() -> None:
    # Released while the interpreter still has its modules: collected
    # during their teardown, it could no longer reach the extension.
    global _default
    ctx, _default = _default, None
    if ctx is not None:
        ctx._handle.close()


def _context(ctx: Optional[Context]) -> Context:
    """ctx, or the default context when it is None."""
    if ctx is None:
        return default_context()
    if not isinstance(ctx, Context):
        raise TypeError(f"expected a hangar.Context or None, not {type(ctx).__name__}")
    return ctx


def _ctx_and_id(first: "Context | str | None", second: Optional[str], what: str) -> Tuple[Context, str]:
    """(context, id) from a call written f(id) (the default context) or f(ctx, id)."""
    if isinstance(first, str):
        if second is not None:
            raise TypeError(f"expected ({what}) or (ctx, {what}), not two strings")
        return default_context(), first
    if second is None:
        raise TypeError(f"missing the {what}")
    return _context(first), second
