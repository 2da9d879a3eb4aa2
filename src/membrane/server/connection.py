"""One client connection: its reader loop, its writer and its in-flight calls.

The reader takes one frame at a time with a bounded buffer. A malformed line is answered with
a parse (or invalid-request) error and the connection lives on; a line over 1 MiB is answered
with an error and the connection is closed (the rest of that line cannot be framed). Each
request runs in its own task, so a slow ``runs/wait`` never holds up the next call, and a
client that stalls mid-line holds up nobody: every connection has its own reader.

The connection reads and writes through asyncio's streams over the accepted socket (the
server runs on anyio's asyncio backend): a frame is written whole in one ``write`` (so frames
of concurrent replies never interleave, with no lock), and a writer waits only while the
peer's buffer is full. Task groups and cancellation stay anyio's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup

from membrane.errors import MembraneError, RuntimeUnavailable
from membrane.json_types import JSONDict, JSONValue
from membrane.server.framing import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MAX_FRAME_BYTES,
    FrameError,
    Request,
    Response,
    error_frame,
    membrane_error_frame,
    notification_frame,
    parse_frame,
    result_frame,
)

__all__ = ["Connection", "Dispatch", "InvalidParams", "UnknownMethod"]

#: Bytes a peer may leave unread before a writer waits for it.
_WRITE_HIGH_WATER = 1 << 20


class InvalidParams(Exception):
    """A request's params do not fit its method (JSON-RPC -32602)."""

    def __init__(self, message: str, data: JSONDict | None = None) -> None:
        super().__init__(message)
        self.data = data


class UnknownMethod(Exception):
    """No such method (JSON-RPC -32601)."""


#: Runs one request for a connection and returns its result.
Dispatch = Callable[["Connection", Request], Awaitable[JSONValue]]


def _oversized() -> bytes:
    return error_frame(
        None,
        INVALID_REQUEST,
        f"frame over {MAX_FRAME_BYTES} bytes; the connection is closed",
        {"code": "protocol-error", "limit": MAX_FRAME_BYTES},
    )


class Connection:
    """A connected, uid-checked peer. ``state`` is the method layer's (the caller, watches)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        dispatch: Dispatch,
        peer_pid: int,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.peer_pid = peer_pid
        self.state: dict[str, object] = {}
        self._dispatch = dispatch
        self._group: TaskGroup | None = None
        #: The requests' own tasks (plain asyncio tasks: cheaper to start than the group's).
        self._calls: set[asyncio.Task[None]] = set()
        self._closed = False
        writer.transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)
        #: Requests running now; the server's drain waits for them (``wait_idle``).
        self.in_flight = 0
        self._idle: anyio.Event | None = None
        self.accepting = True
        #: Receives the client's replies to the server's own requests (``approval/request``).
        self.on_response: Callable[[Response], None] | None = None
        #: Set once the connection is closed.
        self.gone = anyio.Event()

    @property
    def group(self) -> TaskGroup:
        """The connection's task group: subscriptions live and die with the connection."""
        assert self._group is not None
        return self._group

    async def serve(self) -> None:
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                await self._read()
            finally:
                group.cancel_scope.cancel()
                self._cancel_calls()
        await self.close()

    def _cancel_calls(self) -> None:
        for task in list(self._calls):
            task.cancel()

    async def _read(self) -> None:
        reader = self.reader
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError:
                await self.send(_oversized())
                return
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                return
            if len(line) > MAX_FRAME_BYTES + 1:
                await self.send(_oversized())
                return
            if not line.strip():
                continue
            try:
                message = parse_frame(line)
            except FrameError as exc:
                await self.send(error_frame(exc.id, exc.code, exc.message))
                continue
            if isinstance(message, Request):
                if not self.accepting:
                    await self.send(
                        membrane_error_frame(
                            message.id,
                            RuntimeUnavailable(
                                "the runtime is shutting down; no new call is taken",
                                shutting_down=True,
                            ),
                        )
                    )
                    continue
                self._begin()
                task = asyncio.get_running_loop().create_task(self._handle(message))
                self._calls.add(task)
                task.add_done_callback(self._calls.discard)
            elif isinstance(message, Response) and self.on_response is not None:
                self.on_response(message)
            # Notifications and other responses from a client need no answer.

    async def wait_idle(self) -> None:
        """Return once no request of this connection is running."""
        while self.in_flight:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    def _begin(self) -> None:
        self.in_flight += 1

    def _end(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0 and self._idle is not None:
            self._idle.set()
            self._idle = None

    async def _handle(self, request: Request) -> None:
        try:
            try:
                result = await self._dispatch(self, request)
            except MembraneError as exc:
                frame = membrane_error_frame(request.id, exc)
            except InvalidParams as exc:
                frame = error_frame(request.id, -32602, str(exc), exc.data)
            except UnknownMethod as exc:
                frame = error_frame(request.id, -32601, str(exc))
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:  # a bug: answered, never a dead connection
                frame = error_frame(
                    request.id, INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}"
                )
            else:
                frame = result_frame(request.id, result)
            await self.send(frame)
        finally:
            self._end()

    async def send(self, frame: bytes) -> None:
        """Write one frame; a peer that has gone away is not an error here."""
        writer = self.writer
        if self._closed or writer.transport.is_closing():
            return
        writer.write(frame)
        if writer.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
            with contextlib.suppress(ConnectionError, OSError):
                await writer.drain()

    async def notify(self, method: str, params: JSONDict) -> None:
        await self.send(notification_frame(method, params))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.gone.set()
        if self._group is not None:
            self._group.cancel_scope.cancel()
        self._cancel_calls()
        with contextlib.suppress(Exception):
            self.writer.close()
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            with anyio.move_on_after(1.0):
                await self.writer.wait_closed()
