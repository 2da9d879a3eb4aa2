"""Reading a definition file's bytes: the size limit and the reader that never blocks.

Apart from the parser, so that a catalog whose files are all in the definition cache reads and
hashes them without importing the YAML parser.
"""

from __future__ import annotations

import os
import stat
from typing import Final

try:  # hashlib's own BLAKE2, without hashlib loading OpenSSL for the algorithms it wraps
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without the built-in module
    from hashlib import blake2b

__all__ = ["MAX_BYTES", "content_digest", "read_file_bytes"]

#: The largest definition file read, in bytes.
MAX_BYTES: Final = 1 << 20


def read_file_bytes(path: str) -> bytes:
    """At most ``MAX_BYTES + 1`` bytes of the regular file ``path``, without ever blocking.

    The file is opened non-blocking, so a FIFO or a device named ``*.md`` cannot hang the
    reader, and anything but a regular file (a FIFO, a socket, a device) is refused with an
    ``OSError`` that says so; a symlink loop is the kernel's ``ELOOP`` error.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(0, "not a regular file (a FIFO, socket or device is never read)", path)
        # Plain reads sized by the file (no buffered reader, no 1 MiB buffer per file); a file
        # that grows while it is read is read on to its end or the limit.
        chunks: list[bytes] = []
        left = MAX_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, info.st_size + 1 if not chunks else 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks) if len(chunks) != 1 else chunks[0]
    finally:
        os.close(fd)


def content_digest(data: bytes) -> bytes:
    """The 16-byte BLAKE2b digest that keys a file's cached parse."""
    return blake2b(data, digest_size=16).digest()
