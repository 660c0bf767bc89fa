"""hangar: sandboxes for untrusted code, on any provider, from Python.

    import hangar

    with hangar.Sandbox.create() as sb:        # the default context
        r = sb.commands.run("echo hello")
        print(r.exit_code, r.stdout.text)

hangar.aio has the same API for asyncio (AsyncSandbox, ...).

A thin layer over libhangar (see libhangar(3) and hangar-python(7)): every
call that can block releases the GIL, failures raise the HangarError
subclass of their kind, and handles are released exactly once whatever the
order Python drops them in.
"""

from . import _hangar
from ._types import (CAP_FORK, CAP_FS_PAUSE, CAP_HOT_RESUME, CAP_IMAGES, CAP_KERNEL_ISOLATION, CAP_PAUSE, CAP_PTY,
                     CAP_SNAPSHOT, CAP_TEMPLATES, FILE_DIRECTORY, FILE_OTHER, FILE_REGULAR, FORK_CHECKPOINT,
                     FORK_NATIVE, FORK_SNAPSHOT, HOOK_COLD, HOOK_PARK, HOOK_WAKE, LOG_DEBUG, LOG_ERROR, LOG_INFO,
                     LOG_WARNING, PAUSED, PTY, RESUME_COLD, RESUME_FRESH, RESUME_HOT, RESUME_NONE, RUNNING,
                     SESSION_ACTIVE, SESSION_ARCHIVED, SESSION_PARKED, SESSION_SUSPENDED, SETTING_DEFAULT,
                     SETTING_ENVIRONMENT, SETTING_EXPLICIT, SIGKILL, SIGTERM, STDERR, STDOUT, CheckpointInfo,
                     EnvdEndpoint, EnvironmentInfo, ExecResult, FileInfo, ImageInfo, ImageProgress, LogEntry,
                     Metric, Output, PortEndpoint, ProviderInfo, PublishResult, ReapResult, SandboxInfo,
                     SessionInfo, Setting, SnapshotInfo, TemplateInfo, TierInfo)
from .checkpoint import Checkpoint
from .commands import Commands, Pty, PtySize
from .context import Context, default_context
from .errors import (ERROR_CLASSES, BusyError, CanceledError, CapacityError, ConfigError, CreateError, DeadlineError,
                     ExistsError, FileError, GoneError, HangarError, InvalidArgumentError, NoMemoryError,
                     NotFoundError, PausedError, ProtocolError, RefusedError, SystemCallError, TooLargeError,
                     UnavailableError, UnsupportedError, _from_details, error_class)
from .files import EVENT_CHMOD, EVENT_CREATE, EVENT_REMOVE, EVENT_WRITE, Files, FilesystemEvent, WatchHandle
from .process import Process
from .sandbox import ForkResult, Sandbox
from .session import Session, SessionForkResult

_hangar.set_error_factory(_from_details)

__version__: str = _hangar.HANGAR_VERSION_STRING if hasattr(_hangar, "HANGAR_VERSION_STRING") else "0"

__all__ = [
    "Context", "default_context", "Sandbox", "Commands", "Files", "Pty", "PtySize", "WatchHandle",
    "FilesystemEvent", "EVENT_CREATE", "EVENT_WRITE", "EVENT_REMOVE", "EVENT_CHMOD", "Process", "Session", "Checkpoint", "ForkResult", "SessionForkResult",
    "ExecResult", "Output", "SandboxInfo", "FileInfo", "Metric", "LogEntry", "Setting", "TierInfo",
    "EnvdEndpoint", "PortEndpoint", "EnvironmentInfo", "PublishResult", "TemplateInfo", "ImageInfo", "ImageProgress", "ProviderInfo",
    "SessionInfo", "CheckpointInfo", "ReapResult", "SnapshotInfo",
    "HangarError", "InvalidArgumentError", "NoMemoryError", "ConfigError", "UnavailableError", "CapacityError",
    "CreateError", "GoneError", "PausedError", "FileError", "TooLargeError", "DeadlineError", "RefusedError",
    "UnsupportedError", "ProtocolError", "NotFoundError", "SystemCallError", "ExistsError", "CanceledError",
    "BusyError",
    "ERROR_CLASSES", "error_class",
    "STDOUT", "STDERR", "PTY", "RUNNING", "PAUSED", "FILE_OTHER", "FILE_REGULAR", "FILE_DIRECTORY",
    "CAP_PAUSE", "CAP_HOT_RESUME", "CAP_PTY", "CAP_SNAPSHOT", "CAP_FORK", "CAP_KERNEL_ISOLATION",
    "CAP_FS_PAUSE", "CAP_TEMPLATES", "CAP_IMAGES", "SIGTERM", "SIGKILL", "LOG_ERROR", "LOG_WARNING", "LOG_INFO",
    "LOG_DEBUG", "SESSION_ACTIVE", "SESSION_SUSPENDED", "SESSION_PARKED", "SESSION_ARCHIVED", "RESUME_NONE",
    "RESUME_HOT", "RESUME_COLD", "RESUME_FRESH", "HOOK_PARK", "HOOK_WAKE", "HOOK_COLD", "FORK_NATIVE",
    "FORK_SNAPSHOT", "FORK_CHECKPOINT", "SETTING_DEFAULT", "SETTING_ENVIRONMENT", "SETTING_EXPLICIT",
]
