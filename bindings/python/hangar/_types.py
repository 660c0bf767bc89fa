"""Values the API returns: results and descriptions, plain and immutable."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

# Streams of output callbacks: callback(stream, data).
STDOUT = 1
STDERR = 2
PTY = 3

# Create options: network.
NETWORK_DEFAULT = 0
NETWORK_ON = 1
NETWORK_OFF = 2

# SandboxInfo.state.
RUNNING = 1
PAUSED = 2

# FileInfo.type.
FILE_OTHER = 0
FILE_REGULAR = 1
FILE_DIRECTORY = 2

# Provider capabilities (Provider.capabilities).
CAP_PAUSE = 1 << 0
CAP_HOT_RESUME = 1 << 1
CAP_PTY = 1 << 2
CAP_SNAPSHOT = 1 << 3
CAP_FORK = 1 << 4
CAP_KERNEL_ISOLATION = 1 << 5
CAP_FS_PAUSE = 1 << 6
CAP_TEMPLATES = 1 << 7
CAP_IMAGES = 1 << 8

# Signals Process.signal() sends.
SIGTERM = 15
SIGKILL = 9

# Log levels (Context(on_log=..., log_level=...)).
LOG_ERROR = 3
LOG_WARNING = 4
LOG_INFO = 6
LOG_DEBUG = 7

# SessionInfo.state and SessionInfo.last_resume.
SESSION_ACTIVE = 1
SESSION_SUSPENDED = 2
SESSION_PARKED = 3
SESSION_ARCHIVED = 4
RESUME_NONE = 0
RESUME_HOT = 1
RESUME_COLD = 2
RESUME_FRESH = 3

# Session hooks (Context.set_session_hook()).
HOOK_PARK = 1
HOOK_WAKE = 2
HOOK_COLD = 3

# ForkResult.method of a session fork.
FORK_NATIVE = 1
FORK_SNAPSHOT = 2
FORK_CHECKPOINT = 3

# Settings' sources (Setting.source).
SETTING_DEFAULT = 0
SETTING_ENVIRONMENT = 1
SETTING_EXPLICIT = 2

# Variables for a command: {"KEY": "value"} or ["KEY=value", ...].
Env = Union[Mapping[str, str], Sequence[str]]
Labels = Union[Mapping[str, str], Sequence[str]]

_MARKER = b" bytes of output omitted ...]\n"


def _pairs(v: Optional[Union[Mapping[str, str], Sequence[str]]]) -> Optional[List[str]]:
    if v is None:
        return None
    if isinstance(v, Mapping):
        return [f"{k}={val}" for k, val in v.items()]
    if isinstance(v, (str, bytes)):
        raise TypeError("expected a mapping or a sequence of 'KEY=value' strings, not a string")
    return list(v)


class Output(bytes):
    """A command's output as bytes; .text decodes it (UTF-8, invalid bytes replaced)."""

    @property
    def text(self) -> str:
        """The output decoded as UTF-8, each invalid byte replaced by U+FFFD."""
        return self.decode("utf-8", "replace")


def _truncated(kept: bytes, produced: int) -> bool:
    # What was kept is the output itself unless the middle was dropped, when
    # a marker line saying how much stands between head and tail (kept can
    # then be as long as what was produced, never otherwise shorter).
    return len(kept) != produced or (produced > 0 and _MARKER in kept)


@dataclass(frozen=True)
class ExecResult:
    """The outcome of Sandbox.exec(). A non-zero exit is a result, not an error.

    stdout and stderr keep the first and last halves of output_limit bytes
    each, with a marker line between them when the middle was dropped
    (truncated is then True); stdout_bytes and stderr_bytes count all
    that was produced.
    """

    exit_code: int
    stdout: Output
    stderr: Output
    timed_out: bool
    truncated: bool
    stdout_bytes: int
    stderr_bytes: int
    duration: float
    oom_killed: bool

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.exit_code == 0

    @classmethod
    def _from_raw(cls, t: Sequence[Any]) -> "ExecResult":
        # The extension's tuple: (exit_code, timed_out, stdout, stderr,
        # stdout_bytes, stderr_bytes, duration_us, oom_killed). On every
        # exec: positional, no conversions the C side already made.
        code, timed_out, o, e, n_out, n_err, dur, oom = t
        out, err = Output(o), Output(e)
        return cls(code, out, err, timed_out != 0, _truncated(out, n_out) or _truncated(err, n_err), n_out, n_err,
                   dur / 1e6, oom != 0)


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox as its provider describes it. Times are microseconds since the epoch (0: unknown/none)."""

    id: str
    provider: str
    template_id: str
    state: int
    created_at_us: int
    expires_at_us: int

    @property
    def paused(self) -> bool:
        """True when the sandbox is paused (state PAUSED): commands on it raise PausedError until resumed."""
        return self.state == PAUSED


@dataclass(frozen=True)
class FileInfo:
    """One file or directory in a sandbox."""

    name: str
    path: str
    type: int
    mode: int
    bytes: int
    mtime_us: int
    owner: Optional[str]
    group: Optional[str]
    permissions: Optional[str]
    symlink_target: Optional[str]

    @property
    def is_dir(self) -> bool:
        """True for a directory (type FILE_DIRECTORY; a symlink reports its target's type)."""
        return self.type == FILE_DIRECTORY

    @property
    def is_file(self) -> bool:
        """True for a regular file (type FILE_REGULAR; a symlink reports its target's type)."""
        return self.type == FILE_REGULAR


@dataclass(frozen=True)
class Metric:
    """One resource sample of a sandbox."""

    timestamp_us: int
    cpu_count: int
    cpu_used_pct: float
    mem_used_bytes: int
    mem_total_bytes: int
    disk_used_bytes: int
    disk_total_bytes: int
    pids_used: int
    pids_max: int


@dataclass(frozen=True)
class LogEntry:
    """One line of a sandbox's platform log."""

    timestamp_us: int
    level: str
    message: str


@dataclass(frozen=True)
class Setting:
    """One HANGAR_* setting; secret values are masked."""

    name: str
    value: str
    source: int


@dataclass(frozen=True)
class TierInfo:
    """A tier, its providers in the order a create tries them, and their cooldowns."""

    name: str
    providers: List[str]
    loaded: List[bool]
    cooling_until_us: List[int]
    falls_back: bool
    hedge_ms: int


@dataclass(frozen=True)
class EnvironmentInfo:
    """A named sandbox description from HANGAR_ENVIRONMENTS_FILE."""

    name: str
    description: str
    tier: str
    workspace: str
    user: str
    timeout_sec: int
    network: int
    templates: Dict[str, str]
    env: Dict[str, str]
    image: str
    """The OCI image its sandboxes run where it names no template ("" when none)."""

    @classmethod
    def _from_raw(cls, d: Mapping[str, Any]) -> "EnvironmentInfo":
        return cls(name=d["name"], description=d["description"], tier=d["tier"], workspace=d["workspace"],
                   user=d["user"], timeout_sec=d["timeout_sec"], network=d["network"],
                   templates=json.loads(d["templates_json"]), env=json.loads(d["env_json"]), image=d["image"])


@dataclass(frozen=True)
class EnvdEndpoint:
    """Where a sandbox's envd answers (Sandbox.envd_endpoint())."""

    url: str
    """The base of envd's paths."""
    socket_path: str
    """A unix socket to connect to instead of the url's host, or ""."""
    access_token: str
    """envd's X-Access-Token ("" when none): the sandbox's secret."""
    headers: List[str]
    """"Name: value" lines every request must carry as well."""


@dataclass(frozen=True)
class PortEndpoint:
    """Where a sandbox's port answers on a platform that routes ports (Sandbox.port_endpoint())."""

    url: str
    """http://HOST:PORT or https://HOST[:PORT]: connect there and send HOST[:PORT] as Host."""
    headers: List[str]
    """"Name: value" lines every request must carry (the platform's traffic token: a secret)."""


@dataclass(frozen=True)
class PublishResult:
    """What Context.publish_environment() did on one provider of the environment's tier."""

    provider: str
    action: str
    """built, reused, named, image or failed."""
    template_id: str
    """What creates on this provider use ("" when failed)."""
    digest: str
    """The image's digest where known, else ""."""
    error: int
    """0, or the HANGAR_E* code of this provider's failure."""
    message: str

    @classmethod
    def _from_raw(cls, d: Mapping[str, Any]) -> "PublishResult":
        return cls(provider=d["provider"], action=d["action"], template_id=d["template_id"], digest=d["digest"],
                   error=int(d["error"]), message=d["message"])


@dataclass(frozen=True)
class TemplateInfo:
    """A template a provider can create sandboxes from."""

    template_id: str
    name: str
    status: str
    provider: str


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot a provider keeps; its id is a template id for new sandboxes."""

    snapshot_id: str
    name: str
    sandbox_id: str
    provider: str
    created_at_us: int
    released: bool


@dataclass(frozen=True)
class ImageInfo:
    """An image of the local image store (see hangar-images(7))."""

    digest: str
    names: List[str]
    config_digest: str
    os: str
    architecture: str
    size_bytes: int
    layers: List[str]
    env: List[str]
    workdir: str
    user: str
    created_us: int
    in_use: bool


@dataclass(frozen=True)
class ImageProgress:
    """Where an image import stands: phase, the layer's blob digest ("" between layers), layers and bytes."""

    phase: str
    layer: str
    layers_done: int
    layers_total: int
    bytes_done: int
    bytes_total: int


@dataclass(frozen=True)
class ProviderInfo:
    """A registered provider and its HANGAR_CAP_* bits."""

    name: str
    capabilities: int

    def has(self, cap: int) -> bool:
        """Whether the provider reported the capability cap (one of the CAP_* bits)."""
        return bool(self.capabilities & cap)


@dataclass(frozen=True)
class ReapResult:
    """What one Context.reap_as_leader() pass did."""

    leader: bool
    sessions_reaped: int
    records_forgotten: int
    lease_expires_us: int


@dataclass(frozen=True)
class SessionInfo:
    """What the state store says about a session."""

    id: str
    state: int
    last_resume: int
    last_resume_reason: str
    suspend_reason: str
    environment: str
    workspace: str
    provider: str
    sandbox_id: str
    checkpoint_id: str
    parent_id: str
    fork_group: str
    labels: Dict[str, str]
    flags: int
    created_at_us: int
    updated_at_us: int
    parked_since_us: int

    @classmethod
    def _from_raw(cls, d: Mapping[str, Any]) -> "SessionInfo":
        d = dict(d)
        d["labels"] = json.loads(d.pop("labels_json") or "{}")
        return cls(**d)


@dataclass(frozen=True)
class CheckpointInfo:
    """What the index says about a checkpoint."""

    id: str
    session_id: str
    parent_id: str
    workspace: str
    selection: str
    store_url: str
    content_hash: str
    labels: Dict[str, str]
    created_at_us: int
    stored_bytes: int
    archive_bytes: int
    files: int
    blob_bytes: int

    @classmethod
    def _from_raw(cls, d: Mapping[str, Any]) -> "CheckpointInfo":
        d = dict(d)
        d["labels"] = json.loads(d.pop("labels_json") or "{}")
        return cls(**d)



