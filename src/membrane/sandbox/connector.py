"""The runtime socket handed to a sandboxed command as a descriptor, never by its path.

Under Landlock a command may not make a Unix socket at all (``socket(AF_UNIX, ...)`` is refused
by its seccomp filter: Landlock does not govern connecting to a socket on the file system, so
a socket the command could make would reach D-Bus, Docker or systemd). It still calls back on
Membrane's socket through a *connector*: one end of a ``SOCK_SEQPACKET`` pair, kept open in the
command as descriptor ``$MEMBRANE_SOCKET_FD``. A client sends one byte on it and receives a
fresh connection to the runtime socket (``SCM_RIGHTS``), made by Membrane outside the sandbox.
Every ``membrane`` command the call starts, one after another or side by side, gets a
connection of its own, and nothing else: the connector connects only to the runtime socket.

:func:`serve_connector` is the runtime's side (it runs while the command runs);
:func:`connect_through` is the client's (:mod:`membrane.server.client` uses it when
``$MEMBRANE_SOCKET_FD`` is set). :func:`socket_address` is how both reach a socket path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from membrane.errors import SocketPathTooLong

__all__ = [
    "SOCKET_FD_ENV",
    "SOCKET_PATH_LIMIT",
    "connect_through",
    "connector_pair",
    "serve_connector",
    "socket_address",
]

#: The variable naming the connector's descriptor in a sandboxed command.
SOCKET_FD_ENV: Final = "MEMBRANE_SOCKET_FD"
#: The most bytes a Unix socket address (``sun_path``) holds on Linux, its final NUL excluded.
SOCKET_PATH_LIMIT: Final = 107
#: The longest refusal a connector sends back.
_REPLY_BYTES: Final = 512


@contextlib.contextmanager
def socket_address(path: Path) -> Iterator[str]:
    """The address to ``bind`` or ``connect`` for ``path``: the path itself when it fits in a
    Unix socket address, else ``/proc/self/fd/N/NAME`` through a descriptor of its folder,
    open while the context is. ``SocketPathTooLong`` when neither fits."""
    text = str(path)
    if len(os.fsencode(text)) <= SOCKET_PATH_LIMIT:
        yield text
        return
    # An OSError here (no such folder) is the caller's, as a failed bind or connect would be.
    folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        short = f"/proc/self/fd/{folder}/{path.name}"
        if len(os.fsencode(short)) > SOCKET_PATH_LIMIT or not os.path.isdir(
            f"/proc/self/fd/{folder}"
        ):
            raise SocketPathTooLong(
                f"the socket path {text} is {len(os.fsencode(text))} bytes, over the "
                f"{SOCKET_PATH_LIMIT} a Unix socket address holds, and cannot be reached "
                "through its folder either",
                socket=text,
                limit=SOCKET_PATH_LIMIT,
                hint="pass a shorter --socket, or set MEMBRANE_SOCKET to a shorter path",
            )
        yield short
    finally:
        os.close(folder)


def connector_pair() -> tuple[socket.socket, socket.socket]:
    """``(runtime's end, command's end)`` of a new connector; the command's end is the one to
    keep open in the command."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def _connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with socket_address(path) as address:
            sock.connect(address)
    except BaseException:
        sock.close()
        raise
    return sock


async def serve_connector(end: socket.socket, path: Path) -> None:
    """Answer every request on ``end`` with a new connection to ``path`` (or the reason there
    is none), until the command's side is closed or the caller is cancelled. Takes ``end``
    over and closes it."""
    import anyio
    import anyio.to_thread

    with end:
        end.setblocking(False)
        while True:
            await anyio.wait_readable(end)
            try:
                request = end.recv(16)
            except BlockingIOError:
                continue
            except OSError:
                return
            if not request:
                return
            try:
                made = await anyio.to_thread.run_sync(_connect, path)
            except (OSError, SocketPathTooLong) as exc:
                reason = f"no runtime answers on {path}: {exc}".encode()[:_REPLY_BYTES]
                with contextlib.suppress(OSError):
                    end.send(b"e" + reason)
                continue
            with made:
                try:
                    socket.send_fds(end, [b"c"], [made.fileno()])
                except OSError:
                    return


def connect_through(fd: int) -> socket.socket:
    """A new connection to the runtime socket, asked of the connector ``fd`` (blocking);
    ``OSError`` when ``fd`` is no connector or the runtime gave none."""
    with socket.socket(fileno=os.dup(fd)) as channel:
        if channel.type != socket.SOCK_SEQPACKET:
            raise OSError(errno.ENOTSOCK, f"descriptor {fd} is not Membrane's connector")
        channel.send(b"c")
        reply, fds, _, _ = socket.recv_fds(channel, _REPLY_BYTES + 1, 1)
    if not fds:
        reason = reply[1:].decode("utf-8", "replace") or "the connector was closed"
        raise OSError(errno.ECONNREFUSED, reason)
    return socket.socket(fileno=fds[0])
