"""Directory change notification for the catalog: Linux inotify, read without blocking.

``DirectoryWatcher.create()`` returns ``None`` where the platform (or its limits) gives no
watcher; the catalog then falls back to its stat walk. With one, a reload asks ``changes()``,
which is one ``poll`` with no wait when nothing happened (no read, and no error raised by one
finding nothing), whatever the number of files: the
kernel queued every change to a watched directory's entries (created, deleted, renamed,
written, attributes) since the last call.

``changes()`` answers ``None`` when it cannot say exactly what changed (the kernel's queue
overflowed, or a watched directory itself went away or moved): the caller rescans.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import select
import struct
import sys
from dataclasses import dataclass
from typing import Final

__all__ = ["Change", "DirectoryWatcher"]

_IN_MODIFY: Final = 0x00000002
_IN_ATTRIB: Final = 0x00000004
_IN_CLOSE_WRITE: Final = 0x00000008
_IN_MOVED_FROM: Final = 0x00000040
_IN_MOVED_TO: Final = 0x00000080
_IN_CREATE: Final = 0x00000100
_IN_DELETE: Final = 0x00000200
_IN_DELETE_SELF: Final = 0x00000400
_IN_MOVE_SELF: Final = 0x00000800
_IN_Q_OVERFLOW: Final = 0x00004000
_IN_IGNORED: Final = 0x00008000
_IN_ONLYDIR: Final = 0x01000000
_IN_DONT_FOLLOW: Final = 0x02000000
_IN_MASK_ADD: Final = 0x20000000
_IN_ISDIR: Final = 0x40000000
_IN_NONBLOCK: Final = 0o4000
_IN_CLOEXEC: Final = 0o2000000

_MASK: Final = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
    | _IN_DONT_FOLLOW
)
#: An entry appearing (created, linked or moved in), or the directory itself going: what
#: an existing ancestor of an absent root is watched for. A write to its other entries (a
#: project's own files) is none of the catalog's business. Added to a watch the kernel may
#: already hold for the same directory, never narrowing it.
_APPEAR_MASK: Final = (
    _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
    | _IN_DONT_FOLLOW
    | _IN_MASK_ADD
)
#: Events that make the watched directory itself unusable: rescan.
_LOST: Final = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_IGNORED | _IN_Q_OVERFLOW
_HEADER: Final = struct.Struct("iIII")


@dataclass(frozen=True, slots=True)
class Change:
    """One entry of a watched directory changed: ``path`` (the entry), whether it is a
    directory."""

    path: str
    is_dir: bool


class DirectoryWatcher:
    """Watches a set of directories (not recursive: each directory is added by the caller)."""

    def __init__(self, fd: int, libc: ctypes.CDLL) -> None:
        self._fd = fd
        self._libc = libc
        self._paths: dict[int, str] = {}
        self._watches: dict[str, int] = {}
        #: Each watched directory: ``True`` when watched only for entries appearing.
        self._appear: dict[str, bool] = {}
        #: Asks whether anything is queued: a read with nothing there raises (and an
        #: exception costs more than the look).
        self._ready = select.poll()
        self._ready.register(fd, select.POLLIN)

    @classmethod
    def create(cls) -> DirectoryWatcher | None:
        """A watcher, or ``None`` where inotify is unavailable (not Linux, no libc, limits)."""
        if not sys.platform.startswith("linux"):
            return None
        name = ctypes.util.find_library("c") or "libc.so.6"
        try:
            libc = ctypes.CDLL(name, use_errno=True)
            fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None
        return cls(fd, libc)

    def add(self, directory: str, *, appear: bool = False) -> bool:
        """Watch ``directory``'s entries; ``False`` when it cannot be watched (gone, limits,
        a symlink). ``appear``: only for entries appearing in it (and it going), the watch on
        an absent root's nearest existing ancestor; a directory watched both ways is watched
        for everything."""
        known = self._appear.get(directory)
        if known is not None and (not known or appear):
            return True
        mask = _APPEAR_MASK if appear else _MASK
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), mask)
        if wd < 0:
            return False
        other = self._paths.get(wd)
        if other is not None and other != directory:
            # One directory under two paths: the kernel's one watch names one of them.
            if appear:
                return False  # watched under the other path already, for as much or more
            if self._appear.get(other):
                # The watch now serves this path, for everything: the other path's entry
                # goes, so that discarding it never removes the kernel's watch.
                del self._watches[other], self._appear[other]
        self._paths[wd] = directory
        self._watches[directory] = wd
        self._appear[directory] = appear
        return True

    def discard(self, directory: str) -> None:
        """Stop watching ``directory`` (and forget it) if it was watched."""
        wd = self._watches.pop(directory, None)
        self._appear.pop(directory, None)
        if wd is not None:
            self._paths.pop(wd, None)
            self._libc.inotify_rm_watch(self._fd, wd)

    @property
    def directories(self) -> frozenset[str]:
        return frozenset(self._watches)

    def __contains__(self, directory: object) -> bool:
        return directory in self._watches

    def changes(self) -> list[Change] | None:
        """What changed since the last call (empty: nothing), or ``None``: rescan."""
        if not self._ready.poll(0):
            return []  # nothing queued (a closed descriptor is reported, and read below)
        found: list[Change] = []
        lost = False
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                return None
            if not data:
                break
            offset = 0
            while offset + _HEADER.size <= len(data):
                wd, mask, _cookie, size = _HEADER.unpack_from(data, offset)
                offset += _HEADER.size
                raw = data[offset : offset + size].rstrip(b"\0")
                offset += size
                if mask & _LOST:
                    # IN_IGNORED also follows our own ``discard``: only a live watch counts.
                    lost = lost or bool(mask & _IN_Q_OVERFLOW) or wd in self._paths
                    continue
                directory = self._paths.get(wd)
                if directory is None or not raw:
                    continue
                found.append(
                    Change(os.path.join(directory, os.fsdecode(raw)), bool(mask & _IN_ISDIR))
                )
        if lost:
            self.clear()
            return None
        return found

    def clear(self) -> None:
        """Drop every watch (the caller adds them again after its rescan)."""
        for directory in list(self._watches):
            self.discard(directory)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._paths.clear()
            self._watches.clear()
            self._appear.clear()

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            self.close()
