"""``Client``: a JSON-RPC connection to ``membrane serve`` (what the CLI and hosts use).

``async with Client.connect(path) as client:`` opens the socket, reads replies in the
background and matches them to requests by id; notifications (``events/event``,
``actions/list_changed``) arrive on ``client.notifications``; the server's own requests
(``approval/request``) go to the handler ``client.answer(method, handler)`` registered. An
error reply is raised as the ``MembraneError`` subclass its ``data.code`` names
(``ProtocolError`` for the JSON-RPC codes).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import math
import os
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from membrane.errors import MembraneError, ProtocolError, RuntimeUnavailable, error_class
from membrane.json_types import JSONDict, JSONValue
from membrane.sandbox.connector import SOCKET_FD_ENV, connect_through
from membrane.server.framing import (
    INTERNAL_ERROR,
    MAX_FRAME_BYTES,
    METHOD_NOT_FOUND,
    Notification,
    Request,
    Response,
    encode,
    error_frame,
    parse_frame,
    result_frame,
)
from membrane.server.owner import read_owner_token
from membrane.server.transport import socket_address

__all__ = [
    "IDENTITY_ENV",
    "Client",
    "Handler",
    "identity_from_env",
    "own_identity",
    "remote_error",
]

#: How long a connect may wait for a server whose backlog is full.
_CONNECT_SECONDS: Final = 30.0
#: The most a line may hold before the connection is given up (a reply may be large).
_LINE_LIMIT: Final = MAX_FRAME_BYTES * 16

#: Answers one request the server sends (``approval/request``): its params to its result.
Handler = Callable[[JSONDict], Awaitable[JSONValue]]

#: ``initialize``'s ``identity`` fields and the environment variables they come from.
IDENTITY_ENV: Final = {
    "token": "MEMBRANE_TOKEN",
    "role": "MEMBRANE_ROLE",
    "sessionId": "MEMBRANE_SESSION_ID",
    "runId": "MEMBRANE_RUN_ID",
    "ownerId": "MEMBRANE_OWNER_ID",
}


def identity_from_env(env: Mapping[str, str] | None = None) -> JSONDict:
    """The caller's identity as its environment gives it. Only ``token`` can grant anything;
    the rest is metadata the server records."""
    env = os.environ if env is None else env
    return {key: env[var] for key, var in IDENTITY_ENV.items() if env.get(var)}


def own_identity(env: Mapping[str, str] | None = None) -> JSONDict:
    """What this process presents in ``initialize``: the identity its environment gives and,
    outside a run (no ``MEMBRANE_TOKEN``), the owner's token when this process can read
    ``$MEMBRANE_HOME/owner.token`` (``ownerToken``: the caller is then the owner)."""
    identity = identity_from_env(env)
    if "token" not in identity:
        token = read_owner_token()
        if token is not None:
            identity["ownerToken"] = token
    return identity


def remote_error(error: JSONDict) -> MembraneError:
    """The ``MembraneError`` an error reply stands for."""
    data = error.get("data")
    message = str(error.get("message", "error"))
    if isinstance(data, dict) and isinstance(data.get("code"), str):
        fields = {k: v for k, v in data.items() if k not in ("code", "message")}
        cls = error_class(str(data["code"])) or MembraneError
        exc = cls(str(data.get("message", message)), **fields)
        if cls is MembraneError:
            exc.code = str(data["code"])  # type: ignore[misc]
        return exc
    return ProtocolError(message, rpc_code=error.get("code"), rpc_data=data)


class Client:
    """One connection. Use ``Client.connect``; requests may run concurrently."""

    def __init__(self, sock: socket.socket, group: TaskGroup) -> None:
        self._sock = sock
        self._group = group
        self._ids = itertools.count(1)
        self._waiting: dict[int, MemoryObjectSendStream[Response]] = {}
        self._lock = anyio.Lock()
        self._closed = False
        self._handlers: dict[str, Handler] = {}
        send, receive = anyio.create_memory_object_stream[Notification](math.inf)
        self._notes_in: MemoryObjectSendStream[Notification] = send
        self.notifications: MemoryObjectReceiveStream[Notification] = receive

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, path: Path) -> AsyncIterator[Client]:
        """Connect to ``path``; ``RuntimeUnavailable`` when nothing answers there."""
        try:
            sock = await anyio.to_thread.run_sync(_connected, str(path))
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.ETIMEDOUT):
                raise RuntimeUnavailable(
                    f"the runtime on {path} took no connection within {_CONNECT_SECONDS:g} s "
                    "(its backlog stayed full)",
                    socket=str(path),
                    hint="it may be stuck: `membrane doctor` says whether it answers",
                ) from None
            raise RuntimeUnavailable(
                f"no runtime answers on {path}: {exc.strerror or exc}",
                socket=str(path),
                hint="start one with `membrane serve`, or pass --headless",
            ) from None
        failure: Exception | None = None
        with sock:
            sock.setblocking(False)
            async with anyio.create_task_group() as group:
                client = cls(sock, group)
                group.start_soon(client._read)
                try:
                    yield client
                except Exception as exc:
                    # Raised outside the reader's task group, so the caller gets the error
                    # itself and not an exception group around it.
                    failure = exc
                finally:
                    client._closed = True
                    group.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Send one request and return its ``result``; raise its error."""
        request_id = next(self._ids)
        send, receive = anyio.create_memory_object_stream[Response](1)
        self._waiting[request_id] = send
        frame = encode(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params or {})}
        )
        try:
            await self.send_raw(frame)
            with receive:
                try:
                    response = await receive.receive()
                except anyio.EndOfStream:
                    raise ProtocolError(
                        f"the runtime closed the connection before answering {method}"
                    ) from None
        finally:
            self._waiting.pop(request_id, None)
        if response.error is not None:
            raise remote_error(response.error)
        return response.result

    async def send_raw(self, frame: bytes) -> None:
        async with self._lock:
            view = memoryview(frame)
            try:
                while view:
                    try:
                        view = view[self._sock.send(view) :]
                    except BlockingIOError:
                        await anyio.wait_writable(self._sock)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                raise ProtocolError(f"the runtime connection is closed: {exc}") from None

    async def _read(self) -> None:
        # The socket is waited on with ``anyio.wait_readable`` (and ``wait_writable`` above),
        # not through anyio's socket stream: the stream's wait is a future its selector
        # callback sets, so a reader cancelled in the loop iteration in which the socket turns
        # readable (a caller leaving ``connect`` as a reply or the server's close arrives) has
        # that callback set its cancelled future, and the loop reports ``InvalidStateError``.
        sock = self._sock
        pending = b""
        try:
            while True:
                await anyio.wait_readable(sock)
                try:
                    chunk = sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    return
                if not chunk:
                    return  # the end of the stream (a partial line in ``pending`` is dropped)
                if pending:
                    chunk = pending + chunk
                *lines, pending = chunk.split(b"\n")
                if len(pending) > _LINE_LIMIT:
                    return
                for line in lines:
                    self._take(line)
        finally:
            for send in list(self._waiting.values()):
                send.close()
            self._waiting.clear()
            self._notes_in.close()

    def _take(self, line: bytes) -> None:
        try:
            message = parse_frame(line)
        except Exception:
            return
        if isinstance(message, Request):
            self._group.start_soon(self._answer, message)
        elif isinstance(message, Notification):
            self._notes_in.send_nowait(message)
        elif isinstance(message, Response):
            self._deliver(message)

    def answer(self, method: str, handler: Handler) -> None:
        """Answer the server's requests for ``method`` (``approval/request``) with
        ``handler(params)``; a request no handler takes gets ``-32601``."""
        self._handlers[method] = handler

    async def _answer(self, request: Request) -> None:
        handler = self._handlers.get(request.method)
        if handler is None:
            frame = error_frame(request.id, METHOD_NOT_FOUND, f"no handler for {request.method}")
        else:
            try:
                frame = result_frame(request.id, await handler(request.params))
            except Exception as exc:
                frame = error_frame(request.id, INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
        with contextlib.suppress(ProtocolError):
            await self.send_raw(frame)

    def _deliver(self, response: Response) -> None:
        if isinstance(response.id, int) and response.id in self._waiting:
            self._waiting.pop(response.id).send_nowait(response)
        elif response.id is None and response.error is not None:
            # An error about the connection itself (refused peer, oversized frame): every
            # waiting request gets it.
            for send in list(self._waiting.values()):
                send.send_nowait(response)
            self._waiting.clear()


def _connected(path: str) -> socket.socket:
    """A socket connected to ``path``, by a blocking connect (run in a worker thread).

    Not ``anyio.connect_unix``: when the server's backlog is full its non-blocking connect
    waits for the socket to be writable and can be woken twice, which sets its future twice
    (``InvalidStateError``) on a busy machine. Not a Python timeout either, which makes the
    socket non-blocking: a Unix socket's non-blocking connect fails at once with ``EAGAIN``
    while the backlog is full. The socket stays blocking, and its send timeout
    (``SO_SNDTIMEO``), which a Unix connect waits on, bounds the wait.

    In a sandboxed command that may make no Unix socket (Landlock), ``$MEMBRANE_SOCKET_FD``
    names the connector that hands it a connection instead (:mod:`membrane.sandbox.connector`).
    """
    connector = os.environ.get(SOCKET_FD_ENV, "")
    if connector.isdigit():
        return connect_through(int(connector))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(_CONNECT_SECONDS))
        with socket_address(Path(path)) as address:
            sock.connect(address)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(0))
    except BaseException:
        sock.close()
        raise
    return sock


def _timeval(seconds: float) -> bytes:
    whole = int(seconds)
    return struct.pack("@ll", whole, int((seconds - whole) * 1e6))
