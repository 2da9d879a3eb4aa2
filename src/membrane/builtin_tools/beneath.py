"""Reading and writing a file beneath the checkout by directory handles, following no link.

``Write`` and ``Edit`` first resolve the path (symlinks and ``..``) and check that its real
location is inside the checkout and outside its control paths. A check on a path name is not
enough on its own: between the check and the write, a concurrent process (a sibling's ``Bash``)
could replace a folder on the way with a symbolic link to somewhere else. So the write itself
walks the checked real path from the checkout's own folder handle, one component at a time,
with ``O_NOFOLLOW`` at every step (``openat``-style): a component that became a link makes the
walk fail instead of leaving the checkout. The content goes to a temporary file created in the
final folder by handle (``O_EXCL | O_NOFOLLOW``), which is then renamed over the name by handle,
so neither the file nor its temporary sibling can land anywhere else.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from membrane.builtin_tools._support import NotRegularFile, file_kind
from membrane.errors import HardLinkRefused, PathOutsideCheckout

__all__ = [
    "Parent",
    "existing_kind",
    "open_parent",
    "read_beneath",
    "refuse_hard_link",
    "write_beneath",
]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: What ``open`` says when a component it must not follow is a link, or not a folder.
_SWAPPED = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)


class Parent:
    """An open handle on the folder that holds ``name``, reached by :func:`open_parent`."""

    __slots__ = ("fd", "name", "path")

    def __init__(self, fd: int, name: str, path: Path) -> None:
        self.fd = fd
        self.name = name
        self.path = path


def _changed(tool: str, path: Path, root: Path) -> PathOutsideCheckout:
    return PathOutsideCheckout(
        f"{tool} refused to modify {path}: a folder on the way was replaced by a symbolic link "
        "(or something other than a folder) while the write was under way, so the write could "
        "have left the checkout. Nothing was written.",
        tool=tool,
        path=str(path),
        checkout=str(root),
        reason="changed",
    )


@contextlib.contextmanager
def open_parent(root: Path, real: Path, *, tool: str, create: bool) -> Iterator[Parent]:
    """The folder holding ``real`` (a real path inside the real ``root``), opened by walking
    from ``root`` with ``O_NOFOLLOW`` at every step; missing folders are made when ``create``.

    Raises :class:`PathOutsideCheckout` when a component is (now) a link or not a folder.
    """
    parts = real.relative_to(root).parts
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "the checkout itself", str(real))
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in _SWAPPED:
                        raise _changed(tool, real, root) from exc
                    raise
            except OSError as exc:
                if exc.errno in _SWAPPED:
                    raise _changed(tool, real, root) from exc
                raise
            os.close(fd)
            fd = child
        yield Parent(fd, parts[-1], real)
    finally:
        os.close(fd)


def read_beneath(parent: Parent, *, tool: str, root: Path) -> bytes:
    """The content of the regular file ``parent.name``, opened by handle without following a
    link (:class:`NotRegularFile` for anything else; ``FileNotFoundError`` when absent)."""
    try:
        fd = os.open(
            parent.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            dir_fd=parent.fd,
        )  # fmt: skip
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _changed(tool, parent.path, root) from exc
        raise
    with os.fdopen(fd, "rb") as handle:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise NotRegularFile(parent.path, kind)
        os.set_blocking(fd, True)
        return handle.read()


def existing_kind(parent: Parent) -> str | None:
    """What ``parent.name`` is when it exists and is not a regular file (a link counts)."""
    try:
        mode = os.stat(parent.name, dir_fd=parent.fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return file_kind(mode)


def refuse_hard_link(parent: Parent, *, tool: str, shown: str) -> None:
    """:class:`HardLinkRefused` when ``parent.name`` is a regular file with other hard links.

    A hard link is the same file under another name, and nothing says where that name lies:
    perhaps outside the checkout, or in a control path. ``Write`` and ``Edit`` replace a file
    by renaming a new one over its name, which would leave the other name's content as it was
    and quietly break the link; ``Edit`` would also show text read through it. Both refuse."""
    try:
        status = os.stat(parent.name, dir_fd=parent.fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISREG(status.st_mode) and status.st_nlink > 1:
        raise HardLinkRefused(
            f"{tool} refused to modify {shown}: it has {status.st_nlink} hard links (names of "
            "the same file), and another of them may lie outside the checkout, where no child "
            "tool may write. Nothing was written.",
            tool=tool,
            path=str(parent.path),
            links=status.st_nlink,
        )


def write_beneath(parent: Parent, data: bytes, *, umask: int) -> bool:
    """Write ``data`` to ``parent.name`` through a temporary file in the same folder, renamed
    over it by handle; an existing file keeps its permission bits. Returns whether it existed.
    """
    try:
        mode: int | None = (
            os.stat(parent.name, dir_fd=parent.fd, follow_symlinks=False).st_mode & 0o7777
        )
    except FileNotFoundError:
        mode = None
    temp = f".{parent.name[:200]}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o600, dir_fd=parent.fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), mode if mode is not None else 0o666 & ~umask)
        os.rename(temp, parent.name, src_dir_fd=parent.fd, dst_dir_fd=parent.fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=parent.fd)
        raise
    return mode is not None
