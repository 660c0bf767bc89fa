"""sb.files: the sandbox's filesystem, shaped as the E2B SDK's.

A view over the flat methods (Sandbox.read_file(), write_file(),
list_files(), ...): what they do, errors included, is what those do.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Literal, Tuple, Union, overload

from ._types import FileInfo
from .errors import ExistsError

if TYPE_CHECKING:
    # Only named in annotations: the sandbox module imports this one.
    from .sandbox import Sandbox

Data = Union[bytes, bytearray, memoryview, str]

# FilesystemEvent.type.
EVENT_CREATE = "create"
EVENT_WRITE = "write"
EVENT_REMOVE = "remove"
EVENT_CHMOD = "chmod"

# How deep a recursive watch_dir() looks.
_WATCH_DEPTH = 32


@dataclass(frozen=True)
class FilesystemEvent:
    """A change watch_dir() saw: name is relative to the watched directory, type one of EVENT_*."""

    name: str
    type: str


class Files:
    """The filesystem of one sandbox (sb.files), shaped as the E2B SDK's.

    Errors are hangar's own: FileError for a missing path or a file in the
    way, TooLargeError for a read over HANGAR_READ_LIMIT_BYTES, GoneError
    when the sandbox is dead.
    """

    __slots__ = ("_sb",)

    def __init__(self, sb: "Sandbox") -> None:
        self._sb = sb

    @overload
    def read(self, path: str, format: Literal["text"] = "text") -> str: ...

    @overload
    def read(self, path: str, format: Literal["bytes"]) -> bytes: ...

    def read(self, path: str, format: Literal["text", "bytes"] = "text") -> Union[str, bytes]:
        """A whole file: text (UTF-8) by default, format="bytes" for its bytes.

        A file that is not valid UTF-8 raises UnicodeDecodeError as text:
        read it as bytes instead (nothing is replaced behind your back).
        """
        if format not in ("text", "bytes"):
            raise ValueError(f'format must be "text" or "bytes", not {format!r}')
        data = self._sb.read_file(path)
        return data if format == "bytes" else data.decode("utf-8")

    def write(self, path: str, data: Data) -> FileInfo:
        """Writes a whole file (str as UTF-8), creating its parents; returns what was written."""
        self._sb.write_file(path, data)
        return self._sb.stat(path)

    def list(self, path: str, depth: int = 1) -> List[FileInfo]:
        """The entries of a directory, depth levels deep (FileError when it is missing or not one)."""
        return list(self._sb.list_files(path, depth))

    def get_info(self, path: str) -> FileInfo:
        """Describes one path (a symlink itself); FileError when missing."""
        return self._sb.stat(path)

    def exists(self, path: str) -> bool:
        """Whether a path exists; a failure to find out raises, it is never False."""
        return self._sb.exists(path)

    def remove(self, path: str) -> None:
        """Removes a file or a whole tree; a missing path is not an error."""
        self._sb.remove(path)

    def make_dir(self, path: str) -> bool:
        """Creates a directory and its parents: True, or False when the directory is already there.

        A file in the way raises FileError.
        """
        try:
            self._sb.mkdir(path)
        except ExistsError:
            return False
        return True

    def rename(self, old_path: str, new_path: str) -> FileInfo:
        """Renames (replacing a file at new_path, creating its parents); returns the renamed entry."""
        self._sb.rename(old_path, new_path)
        return self._sb.stat(new_path)

    def watch_dir(self, path: str, *, recursive: bool = False) -> "WatchHandle":
        """Starts watching a directory; the handle's get_new_events() says what changed since.

        Unlike E2B's, the watch compares listings of the directory: each
        get_new_events() lists it and reports entries created, removed,
        written (size, time or type changed) or chmod-ed since the last
        listing (a directory itself only when it comes, goes or changes
        mode). A change undone in between (a file created and removed)
        is not seen, and a rename is a remove and a create.
        """
        return WatchHandle(self._sb, path, recursive)


_Snapshot = Dict[str, Tuple[int, int, int, int]]


class WatchHandle:
    """A watch of one directory (Files.watch_dir()): poll it with get_new_events()."""

    def __init__(self, sb: "Sandbox", path: str, recursive: bool) -> None:
        self._sb = sb
        self._path = path
        self._depth = _WATCH_DEPTH if recursive else 1
        self._stopped = False
        self._last = self._snapshot()

    def _snapshot(self) -> _Snapshot:
        root = self._sb.stat(self._path).path
        snap: _Snapshot = {}
        for e in self._sb.list_files(self._path, self._depth):
            # A directory changes when its entries do: those are reported, not it.
            changed = (0, 0) if e.is_dir else (e.bytes, e.mtime_us)
            snap[posixpath.relpath(e.path, root)] = (e.type, *changed, e.mode)
        return snap

    def get_new_events(self) -> List[FilesystemEvent]:
        """What changed since the watch started or the last call, sorted by name."""
        if self._stopped:
            raise ValueError("the watch is stopped")
        now = self._snapshot()
        events = []
        for name in sorted(set(now) | set(self._last)):
            old, new = self._last.get(name), now.get(name)
            if old is None:
                events.append(FilesystemEvent(name, EVENT_CREATE))
            elif new is None:
                events.append(FilesystemEvent(name, EVENT_REMOVE))
            elif old[:3] != new[:3]:
                events.append(FilesystemEvent(name, EVENT_WRITE))
            elif old[3] != new[3]:
                events.append(FilesystemEvent(name, EVENT_CHMOD))
        self._last = now
        return events

    def stop(self) -> None:
        """Stops the watch; get_new_events() then raises ValueError."""
        self._stopped = True
