"""The exceptions of hangar: one class per error kind, under HangarError.

The library reports failures as negative codes (hangar/errors.h); the
extension turns each into an instance of the class mapped to its code here,
and nowhere else. A failed command is not an exception: see ExecResult.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Type

# hangar_error.flags: the request never reached the other side.
ERROR_UNREACHABLE = 0x1


class HangarError(Exception):
    """A libhangar call failed.

    Attributes: code (the negative HANGAR_E* code), name ("gone",
    "timeout", ...), message, http_status (of the failed request, or 0),
    retry_after (seconds the other side asked to wait, or 0), os_errno,
    provider_code (e.g. a Connect code, or ""), category and flags.
    """

    code: int = 0
    name: str = "unknown"

    def __init__(self, message: str, *, code: int | None = None, http_status: int = 0, retry_after: int = 0,
                 os_errno: int = 0, provider_code: str = "", category: int = 0, flags: int = 0) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.http_status = http_status
        self.retry_after = retry_after
        self.os_errno = os_errno
        self.provider_code = provider_code
        self.category = category
        self.flags = flags

    @property
    def unreachable(self) -> bool:
        """True when the request never reached the other side."""
        return bool(self.flags & ERROR_UNREACHABLE)

    def __str__(self) -> str:
        return f"{self.message} ({self.name})"


class InvalidArgumentError(HangarError):
    """An argument is missing, malformed or out of range (HANGAR_EINVAL)."""
    code, name = -1, "invalid"


class NoMemoryError(HangarError):
    """The library ran out of memory (HANGAR_ENOMEM)."""
    code, name = -2, "nomem"


class ConfigError(HangarError):
    """The settings are wrong; the message names the variable (HANGAR_ECONFIG)."""
    code, name = -3, "config"


class UnavailableError(HangarError):
    """The provider is down, unreachable, or refused the credentials (HANGAR_EUNAVAILABLE)."""
    code, name = -4, "unavailable"


class CapacityError(HangarError):
    """The provider is full or rate-limited (HANGAR_ECAPACITY); see retry_after."""
    code, name = -5, "capacity"


class CreateError(HangarError):
    """The sandbox could not be created (HANGAR_ECREATE)."""
    code, name = -6, "create"


class GoneError(HangarError):
    """The sandbox is gone: killed, expired or lost (HANGAR_EGONE)."""
    code, name = -7, "gone"


class PausedError(HangarError):
    """The sandbox is paused; resume it first (HANGAR_EPAUSED)."""
    code, name = -8, "paused"


class FileError(HangarError):
    """A file in the sandbox is missing, unreadable or not what the call needs (HANGAR_EFILE)."""
    code, name = -9, "file"


class TooLargeError(HangarError):
    """Something is larger than the limit that applies to it (HANGAR_ETOOLARGE)."""
    code, name = -10, "too_large"


class DeadlineError(HangarError):
    """A deadline of the library passed: a request or a wait (HANGAR_ETIMEOUT).

    A command that ran out of its own time is not this: it is a result with
    timed_out set.
    """
    code, name = -11, "timeout"


class RefusedError(HangarError):
    """A security rule refused the operation (HANGAR_EREFUSED)."""
    code, name = -12, "refused"


class UnsupportedError(HangarError):
    """The provider lacks the capability this needs (HANGAR_EUNSUPPORTED)."""
    code, name = -13, "unsupported"


class ProtocolError(HangarError):
    """The other side answered something malformed or oversized (HANGAR_EPROTOCOL)."""
    code, name = -14, "protocol"


class NotFoundError(HangarError):
    """No such process, provider, session or checkpoint (HANGAR_ENOTFOUND)."""
    code, name = -15, "not_found"


class SystemCallError(HangarError):
    """A local operating-system call failed; see os_errno (HANGAR_EOS)."""
    code, name = -16, "os"


class ExistsError(HangarError):
    """It already exists (HANGAR_EEXISTS)."""
    code, name = -17, "exists"


class CanceledError(HangarError):
    """The caller's cancel callback stopped the call (HANGAR_ECANCELED)."""
    code, name = -18, "canceled"


class BusyError(HangarError):
    """Another caller is changing it now: a session under another's lease
    (HANGAR_EBUSY); retry_after says when to try again."""
    code, name = -19, "busy"


ERROR_CLASSES: tuple[Type[HangarError], ...] = (
    InvalidArgumentError, NoMemoryError, ConfigError, UnavailableError, CapacityError, CreateError,
    GoneError, PausedError, FileError, TooLargeError, DeadlineError, RefusedError, UnsupportedError,
    ProtocolError, NotFoundError, SystemCallError, ExistsError, CanceledError, BusyError,
)

# The one mapping from codes to classes.
_BY_CODE: Dict[int, Type[HangarError]] = {cls.code: cls for cls in ERROR_CLASSES}


def error_class(code: int) -> Type[HangarError]:
    """The class raised for a HANGAR_E* code (HangarError for codes this version does not know)."""
    return _BY_CODE.get(code, HangarError)


def _from_details(d: Mapping[str, Any]) -> HangarError:
    """Builds the exception for a failure the extension reports (its details as a dict)."""
    code = int(d["code"])
    cls = error_class(code)
    err = cls(str(d["message"]), code=code, http_status=int(d["http_status"]),
              retry_after=int(d["retry_after"]), os_errno=int(d["os_errno"]),
              provider_code=str(d["provider_code"] or ""), category=int(d["category"]), flags=int(d["flags"]))
    if cls is HangarError:
        err.name = str(d["name"])
    return err


def _from_code(code: int, message: str) -> HangarError:
    """Builds the exception for a bare code and message (one fork's failure, say)."""
    return _from_details({"code": code, "name": "", "message": message, "http_status": 0, "retry_after": 0,
                          "os_errno": 0, "provider_code": "", "category": 0, "flags": 0})
