"""hangar.Context: settings, providers, and the callbacks of the library."""

from __future__ import annotations

import json
import threading
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

from . import _hangar as _h
from ._types import (LOG_INFO, EnvironmentInfo, ProviderInfo, ReapResult, SandboxInfo, Setting, TemplateInfo,
                     TierInfo)

EventCallback = Callable[[str, Dict[str, Any]], None]
LogCallback = Callable[[int, str], None]


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


class Context:
    """A library context: the HANGAR_* settings, the providers, and callbacks.

    Context() reads the HANGAR_* environment variables (use_environment=False
    starts from defaults); settings= overrides some, each validated as it is
    set: a wrong value raises ConfigError naming the variable.

    on_event(name, details) receives audit events ("sandbox.created",
    "sandbox.tier_fallback", ...; see hangar_ctx_set_event(3)), on_log(level,
    message) log lines up to log_level. Both may run on library threads.
    An exception either raises is re-raised by the next call on this
    context (or on a sandbox of it) that returns.

    Sandboxes, sessions and checkpoints keep their context alive: it is
    released when the last of them is.
    """

    def __init__(self, settings: Optional[Mapping[str, Optional[str]]] = None, *, use_environment: bool = True,
                 on_event: Optional[EventCallback] = None, on_log: Optional[LogCallback] = None,
                 log_level: int = LOG_INFO) -> None:
        self._ptr: Any = None
        self._holders: List[_Holder] = []
        self._hook: Optional[_Holder] = None
        self._lock = threading.Lock()
        _rc, self._ptr = _h.hangar_ctx_new(0 if use_environment else 1)
        for name, value in (settings or {}).items():
            self.set(name, value)
        if on_event is not None:
            ev = on_event

            def event(args: Any) -> None:
                name, data = args
                ev(name, json.loads(data) if data else {})

            h = _Holder(event)
            self._holders.append(h)
            _h.py_ctx_set_event(self._ptr, h.ptr)
        if on_log is not None:
            lg = on_log

            def log(args: Any) -> None:
                lg(args[0], args[1])

            h = _Holder(log)
            self._holders.append(h)
            _h.py_ctx_set_log(self._ptr, log_level, h.ptr)

    def __del__(self) -> None:
        self._release()

    def _release(self) -> None:
        ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr is None:
            return
        # Nothing of Python uses the context any more (its children hold it):
        # stop the callbacks before their holders go.
        _h.py_ctx_set_event(ptr, None)
        _h.py_ctx_set_log(ptr, 0, None)
        _h.py_session_set_hook(ptr, None)
        _h.hangar_ctx_unref(ptr)
        for h in self._holders:
            h.free()
        if self._hook is not None:
            self._hook.free()

    def _raw(self) -> Any:
        if self._ptr is None:
            raise ValueError("the context is closed")
        return self._ptr

    def _check_callbacks(self) -> None:
        """Raises what an event, log or hook callback raised meanwhile."""
        for h in self._holders:
            h.check()
        if self._hook is not None:
            self._hook.check()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    # ---- settings -------------------------------------------------------------------

    def set(self, name: str, value: Optional[str]) -> None:
        """Overrides one setting (None restores its default); ConfigError names a bad value."""
        _h.hangar_ctx_set(self._raw(), name, value)

    def get(self, name: str) -> str:
        """The effective value of a setting ("" when unset). Secrets come back in clear."""
        _rc, value = _h.hangar_ctx_get(self._raw(), name)
        return bytes(value).decode("utf-8", "surrogateescape")

    def settings(self, provider: Optional[str] = None, *, all: bool = True) -> Iterator[Setting]:
        """Every setting, secrets masked: the library's then each provider's.

        With all=False, only the library's own (provider None) or one provider's.
        """
        out: List[Setting] = []
        _h.py_ctx_settings(self._raw(), provider, 1 if all and provider is None else 0,
                           lambda t: out.append(Setting(t[0], t[1], t[2])))
        return iter(out)

    # ---- providers, tiers, environments, templates ------------------------------------

    def providers(self) -> Iterator[ProviderInfo]:
        """The registered providers, built-in first."""
        out: List[ProviderInfo] = []
        _h.py_provider_foreach(self._raw(), lambda p: out.append(
            ProviderInfo(_h.hangar_provider_name(p), int(_h.hangar_provider_capabilities(p)))))
        return iter(out)

    def provider(self, name: Optional[str] = None) -> ProviderInfo:
        """One provider by name (None: HANGAR_DEFAULT_PROVIDER), set up; NotFoundError if none."""
        _rc, p = _h.hangar_provider_lookup(self._raw(), name)
        try:
            return ProviderInfo(_h.hangar_provider_name(p), int(_h.hangar_provider_capabilities(p)))
        finally:
            _h.hangar_provider_unref(p)

    def tiers(self) -> Iterator[TierInfo]:
        """The four tiers (fast, isolated, default, heavy) with their providers and cooldowns."""
        out: List[TierInfo] = []
        _h.py_tier_foreach(self._raw(), lambda d: out.append(TierInfo(**d)))
        return iter(out)

    def environments(self) -> Iterator[EnvironmentInfo]:
        """The environments of HANGAR_ENVIRONMENTS_FILE, sorted by name."""
        out: List[EnvironmentInfo] = []
        _h.py_environment_list(self._raw(), None, lambda d: out.append(EnvironmentInfo._from_raw(d)))
        return iter(out)

    def environment(self, name: str) -> EnvironmentInfo:
        """One environment; NotFoundError when there is none of that name."""
        out: List[EnvironmentInfo] = []
        _h.py_environment_list(self._raw(), name, lambda d: out.append(EnvironmentInfo._from_raw(d)))
        return out[0]

    def templates(self, provider: Optional[str] = None) -> Iterator[TemplateInfo]:
        """The templates a provider can create sandboxes from (UnsupportedError where it has none)."""
        out: List[TemplateInfo] = []
        _h.py_template_list(self._raw(), provider, lambda d: out.append(TemplateInfo(**d)))
        return iter(out)

    def build_template(self, name: str, image: str, *, provider: Optional[str] = None, cpu_millis: int = 0,
                       memory_mb: int = 0, disk_mb: int = 0,
                       progress: Optional[Callable[[str, str], None]] = None) -> str:
        """Builds a template from an OCI image and waits until it is ready; returns its id."""
        cb = None if progress is None else (lambda t, p=progress: p(t[0], t[1]))
        tid: str = _h.py_template_build(self._raw(), provider, name, image, cpu_millis, memory_mb, disk_mb, cb)
        return tid

    # ---- sandboxes and sessions ---------------------------------------------------------

    def sandboxes(self, provider: Optional[str] = None) -> Iterator[SandboxInfo]:
        """The sandboxes of one provider, or of every one that answers (provider None)."""
        out: List[SandboxInfo] = []
        _h.py_sandbox_list(self._raw(), provider, lambda d: out.append(SandboxInfo(**d)))
        return iter(out)

    def set_session_hook(self, fn: Optional[Callable[[Any, Any, int], bool]]) -> None:
        """Sets the hook called as fn(session, sandbox, hook) on park, wake and cold resumes.

        Return True (or None) to go on, False to refuse; see hangar_session_set_hook(3).
        """
        from .sandbox import Sandbox
        from .session import Session

        old = self._hook
        if fn is None:
            _h.py_session_set_hook(self._raw(), None)
            self._hook = None
        else:
            user = fn

            def hook(t: Any) -> int:
                s = Session._borrowed(self, t[0])
                sb = Sandbox._borrowed(self, t[1])
                try:
                    r = user(s, sb, int(t[2]))
                finally:
                    s.close()
                    sb.close()
                return 0 if r is None or r else 1

            self._hook = _Holder(hook)
            _h.py_session_set_hook(self._raw(), self._hook.ptr)
        if old is not None:
            old.free()

    def reap(self) -> int:
        """Destroys sandboxes parked too long; returns how many (hangar_session_reap(3))."""
        _rc, n = _h.hangar_session_reap(self._raw())
        return int(n)

    def reap_as_leader(self, lease: str, lease_seconds: int) -> ReapResult:
        """One reaping pass, only in the context holding the store's lease named lease
        (hangar_ctx_reap(3)): processes sharing a store call it periodically, one reaps."""
        return ReapResult(**_h.py_ctx_reap(self._raw(), lease, lease_seconds))

    def release_lease(self, lease: str) -> bool:
        """Gives the reaper's lease up if this context holds it; True when it did."""
        _rc, released = _h.hangar_ctx_reap_release(self._raw(), lease)
        return bool(released)

    def ping_store(self) -> None:
        """Checks that the state store answers now (for readiness probes); raises if not."""
        _h.hangar_ctx_ping_store(self._raw())
