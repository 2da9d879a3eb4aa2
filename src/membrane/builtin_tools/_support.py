"""Helpers shared by the built-in tools: argument readers, text sniffing, file kinds.

Handlers are normally reached through a ``ToolView`` that has already validated the arguments
against the tool's JSON Schema. The readers below check again, cheaply, so a handler called
directly (by a host or a test) fails with ``tool-arguments-invalid`` instead of a ``KeyError``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from membrane.errors import ToolArgumentsInvalid

__all__ = [
    "BINARY_SNIFF_BYTES",
    "UMASK",
    "NotRegularFile",
    "bool_arg",
    "file_kind",
    "in_thread",
    "int_arg",
    "looks_binary",
    "non_regular_kind",
    "number_arg",
    "open_regular",
    "optional_str_arg",
    "str_arg",
]

_T = TypeVar("_T")


async def in_thread(
    function: Callable[..., _T], *args: object, abandon_on_cancel: bool = False
) -> _T:
    """``function(*args)`` in a worker thread. anyio is imported on the first call, so that
    declaring the built-in tools (``membrane explain``) imports no event-loop library."""
    from anyio import to_thread

    return await to_thread.run_sync(function, *args, abandon_on_cancel=abandon_on_cancel)


#: How many leading bytes are inspected to tell text from binary (as git and grep do: a NUL byte).
BINARY_SNIFF_BYTES = 8192


def _read_umask() -> int:
    # Reading the umask means setting it; done once at import, before handlers run in threads.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: This process's umask, for the permission bits of new files.
UMASK = _read_umask()


def _invalid(tool: str, name: str, reason: str) -> ToolArgumentsInvalid:
    return ToolArgumentsInvalid(
        f"{tool}: argument `{name}` {reason}.", tool=tool, path=f"$.{name}", reason=reason
    )


def str_arg(arguments: Mapping[str, Any], name: str, *, tool: str) -> str:
    """A required string argument."""
    value = arguments.get(name)
    if not isinstance(value, str):
        raise _invalid(tool, name, "is required and must be a string")
    return value


def optional_str_arg(arguments: Mapping[str, Any], name: str, *, tool: str) -> str | None:
    """An optional string argument (absent or ``None`` means not given)."""
    value = arguments.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _invalid(tool, name, "must be a string")
    return value


def bool_arg(arguments: Mapping[str, Any], name: str, *, tool: str, default: bool) -> bool:
    """An optional boolean argument."""
    value = arguments.get(name, default)
    if not isinstance(value, bool):
        raise _invalid(tool, name, "must be true or false")
    return value


def int_arg(
    arguments: Mapping[str, Any],
    name: str,
    *,
    tool: str,
    default: int | None,
    minimum: int,
    maximum: int | None = None,
) -> int | None:
    """An optional integer argument within ``[minimum, maximum]``."""
    value = arguments.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(tool, name, "must be an integer")
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and at most {maximum}" if maximum is not None else ""
        raise _invalid(tool, name, f"must be at least {minimum}{upper} (got {value})")
    return value


def number_arg(
    arguments: Mapping[str, Any],
    name: str,
    *,
    tool: str,
    default: float,
    maximum: float,
) -> float:
    """An optional positive number argument, at most ``maximum``."""
    value = arguments.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(tool, name, "must be a number")
    if not 0 < value <= maximum:
        raise _invalid(tool, name, f"must be greater than 0 and at most {maximum:g} (got {value})")
    return float(value)


def looks_binary(head: bytes) -> bool:
    """Whether leading bytes look binary: a NUL byte, as git and GNU grep decide."""
    return b"\x00" in head


class NotRegularFile(OSError):
    """``path`` exists but is not a regular file; ``kind`` says what it is ("a named pipe")."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(f"{path} is {kind}")
        self.kind = kind


def file_kind(mode: int) -> str | None:
    """What a ``st_mode`` describes, in words; ``None`` for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for binary reading, only if it is a regular file.

    The file is opened with ``O_NONBLOCK`` and checked on the open descriptor, so a named pipe
    or a device (or one swapped in after a check) never blocks the calling thread: opening a
    FIFO for reading would otherwise wait forever for a writer. Raises :class:`NotRegularFile`,
    or the ``OSError`` of the open (``FileNotFoundError``...).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise NotRegularFile(path, kind)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def non_regular_kind(path: Path) -> str | None:
    """What ``path`` is when it exists and is not a regular file (``None`` otherwise)."""
    try:
        return file_kind(path.stat().st_mode)
    except OSError:
        return None
