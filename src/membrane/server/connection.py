"""One client connection: its frames in, its replies out, and its in-flight calls.

The connection is the socket's asyncio protocol: bytes arrive in ``data_received`` and every
complete line is taken there, with no reader task in between. A malformed line is answered
with a parse (or invalid-request) error and the connection lives on; a line over 1 MiB (or a
partial line past 1 MiB) is answered with an error and the connection is closed (the rest of
that line cannot be framed). A partial line waits in the connection's own buffer, so a client
that stalls mid-line holds up nobody. The partial lines of all a server's connections share one
budget (``BufferBudget``, ``server_max_buffered_bytes``): the connection whose partial line would
pass it is answered ``too-many-buffered-bytes`` and closed, so many peers each holding a large
partial line cannot grow the server past that bound.

Each request runs in a task of its own, kept by the connection until it ends (closing the
connection cancels it), so one that waits (a slow ``runs/wait``) goes on in its task while the
next calls are answered (``Connection._start``).

A reply is written whole in one ``write`` (so frames of concurrent replies never interleave,
with no lock). While the peer leaves more than 1 MiB unread, the connection stops reading its
requests and writers wait for the buffer to drain. Task groups and cancellation stay anyio's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio
from anyio.abc import TaskGroup

from membrane.errors import MembraneError, RuntimeUnavailable, TooManyBufferedBytes
from membrane.json_types import JSONDict, JSONValue
from membrane.server.framing import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MAX_FRAME_BYTES,
    Encoded,
    FrameError,
    Request,
    Response,
    error_frame,
    membrane_error_frame,
    notification_frame,
    parse_frame,
    result_frame,
)

__all__ = ["BufferBudget", "Connection", "Dispatch", "InvalidParams", "Peer", "UnknownMethod"]

#: Bytes a peer may leave unread before a writer waits for it.
_WRITE_HIGH_WATER = 1 << 20


class InvalidParams(Exception):
    """A request's params do not fit its method (JSON-RPC -32602)."""

    def __init__(self, message: str, data: JSONDict | None = None) -> None:
        super().__init__(message)
        self.data = data


class UnknownMethod(Exception):
    """No such method (JSON-RPC -32601)."""


class Peer(Protocol):
    """What the method layer (``membrane.server.methods``) sees of a connection: a socket's
    (``Connection``) or one in this process (``membrane.server.direct``)."""

    #: The method layer's own state: the caller, watches, the runs it started.
    state: dict[str, object]
    #: The peer's uid as the kernel recorded it (``None``: a caller in this process).
    peer_uid: int | None
    #: Receives the client's replies to the server's own requests (``approval/request``).
    on_response: Callable[[Response], None] | None
    #: Set once the connection is closed.
    gone: anyio.Event

    @property
    def group(self) -> TaskGroup:
        """The task group that subscriptions live in, for as long as the connection."""
        ...

    async def send(self, frame: bytes) -> None:
        """Write one frame to the client."""
        ...

    async def notify(self, method: str, params: JSONDict) -> None:
        """Send the client a notification."""
        ...


#: Runs one request for a connection and returns its result (``Encoded``: already encoded).
Dispatch = Callable[["Connection", Request], Awaitable[JSONValue | Encoded]]


def _oversized() -> bytes:
    return error_frame(
        None,
        INVALID_REQUEST,
        f"frame over {MAX_FRAME_BYTES} bytes; the connection is closed",
        {"code": "protocol-error", "limit": MAX_FRAME_BYTES},
    )


class BufferBudget:
    """The bytes of partial lines that all connections of one server hold together: at most
    ``limit`` (``server_max_buffered_bytes``)."""

    __slots__ = ("held", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> bool:
        """Hold ``size`` more bytes, or say (``False``) that they would pass the limit."""
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        """Release ``size`` bytes held before."""
        self.held -= size


def _overfull(limit: int) -> bytes:
    return membrane_error_frame(
        None,
        TooManyBufferedBytes(
            f"this runtime holds {limit} bytes of partial request lines over all connections, "
            "as many as its settings allow (server_max_buffered_bytes); this connection's line "
            "is dropped and the connection is closed: send whole lines, and connect again",
            limit=limit,
        ),
    )


class Connection(asyncio.Protocol):
    """A connected, uid-checked peer. ``state`` is the method layer's (the caller, watches).

    Made before its transport: ``serve`` runs it once the server has connected the accepted
    socket to it (``loop.connect_accepted_socket``)."""

    def __init__(
        self,
        *,
        dispatch: Dispatch,
        peer_pid: int,
        peer_uid: int | None = None,
        buffers: BufferBudget | None = None,
    ) -> None:
        self.peer_pid = peer_pid
        self.peer_uid = peer_uid
        #: The server's budget for partial lines (``None``: only this line's own cap).
        self._buffers = buffers
        #: The bytes of ``_pending`` held in ``_buffers``.
        self._held = 0
        self.state: dict[str, object] = {}
        self._dispatch = dispatch
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._group: TaskGroup | None = None
        #: The requests' own tasks (plain asyncio tasks: cheaper to start than the group's).
        self._calls: set[asyncio.Task[None]] = set()
        #: Bytes of a line not complete yet (at most ``MAX_FRAME_BYTES``).
        self._pending = bytearray()
        self._closed = False
        #: Set once no more frames are read: end of input, an oversized line, or closing.
        self._ended = anyio.Event()
        #: ``_ended.is_set()``, as a plain attribute (read for every frame).
        self._reading = True
        self._lost = anyio.Event()
        #: Set while the peer's unread bytes are over the high-water mark; writers wait on it.
        self._drained: anyio.Event | None = None
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
        """Hold the connection until its input ends, then close it (cancelling its calls)."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                await self._ended.wait()
            finally:
                group.cancel_scope.cancel()
                self._cancel_calls()
        await self.close()

    def _cancel_calls(self) -> None:
        for task in list(self._calls):
            task.cancel()

    # -- the protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._loop = asyncio.get_running_loop()
        transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)

    def data_received(self, data: bytes) -> None:
        if not self._reading:
            return
        pending = self._pending
        if not pending and data.find(b"\n") == len(data) - 1 and len(data) <= MAX_FRAME_BYTES:
            # The usual case, one whole line and nothing before it, read as it is (the
            # newline is JSON whitespace).
            self._frame(data)
            return
        chunk: bytes | bytearray = data
        scan = 0
        if pending:
            scan = len(pending)
            pending += data
            chunk = pending
        start = 0
        while (end := chunk.find(b"\n", scan)) >= 0:
            if end - start > MAX_FRAME_BYTES:
                self._oversized()
                return
            self._frame(bytes(chunk[start:end]))
            if not self._reading:
                return
            start = scan = end + 1
        if len(chunk) - start > MAX_FRAME_BYTES:
            self._oversized()
            return
        if chunk is pending:
            del pending[:start]
        else:
            pending += data[start:]
        if self._buffers is not None and not self._hold(len(pending)):
            self.write(_overfull(self._buffers.limit))
            self._end_input()

    def _hold(self, size: int) -> bool:
        """Hold ``size`` bytes of partial line in the server's budget (releasing what is no
        longer held); ``False`` when that would pass its limit."""
        buffers = self._buffers
        if buffers is None:
            return True
        if size > self._held and not buffers.take(size - self._held):
            return False
        if size < self._held:
            buffers.give(self._held - size)
        self._held = size
        return True

    def _end_input(self) -> None:
        self._reading = False
        self._pending.clear()
        self._hold(0)
        self._ended.set()

    def eof_received(self) -> bool | None:
        self._end_input()
        return None  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_input()
        self._lost.set()
        self._resume()

    def pause_writing(self) -> None:
        if self._drained is None:
            self._drained = anyio.Event()
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._resume()
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def _resume(self) -> None:
        drained, self._drained = self._drained, None
        if drained is not None:
            drained.set()

    # -- frames -------------------------------------------------------------------------------

    def _oversized(self) -> None:
        self.write(_oversized())
        self._pending.clear()
        self._end_input()

    def _frame(self, line: bytes) -> None:
        try:
            message = parse_frame(line)
        except FrameError as exc:
            if line.strip():  # a blank line is no frame, and no error
                self.write(error_frame(exc.id, exc.code, exc.message))
            return
        if type(message) is Request:
            if not self.accepting:
                self.write(
                    membrane_error_frame(
                        message.id,
                        RuntimeUnavailable(
                            "the runtime is shutting down; no new call is taken",
                            shutting_down=True,
                        ),
                    )
                )
                return
            self.in_flight += 1
            self._start(message)
        elif isinstance(message, Response) and self.on_response is not None:
            self.on_response(message)
        # Notifications and other responses from a client need no answer.

    def _start(self, request: Request) -> None:
        """Run ``request`` in a task of its own, kept until it ends."""
        assert self._loop is not None
        task = asyncio.Task(self._whole(request), loop=self._loop)
        self._calls.add(task)

    async def _whole(self, request: Request) -> None:
        try:
            await self._handle(request)
        finally:
            self._calls.discard(asyncio.current_task())

    async def wait_idle(self) -> None:
        """Return once no request of this connection is running."""
        while self.in_flight:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    def _now_idle(self) -> None:
        idle, self._idle = self._idle, None
        if idle is not None:
            idle.set()

    async def _handle(self, request: Request) -> None:
        try:
            try:
                frame = result_frame(request.id, await self._dispatch(self, request))
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
            transport = self._transport
            if not self._closed and transport is not None and not transport.is_closing():
                transport.write(frame)
                if self._drained is not None:
                    await self._drain()
        finally:
            self.in_flight -= 1
            if not self.in_flight and self._idle is not None:
                self._now_idle()

    # -- writing ------------------------------------------------------------------------------

    def write(self, frame: bytes) -> None:
        """Write one frame now; a peer that has gone away is not an error here."""
        transport = self._transport
        if self._closed or transport is None or transport.is_closing():
            return
        transport.write(frame)

    async def _drain(self) -> None:
        drained = self._drained
        if drained is not None:
            await drained.wait()

    async def send(self, frame: bytes) -> None:
        """Write one frame, then wait while the peer leaves more than 1 MiB unread."""
        self.write(frame)
        if self._drained is not None:
            await self._drain()

    async def notify(self, method: str, params: JSONDict) -> None:
        await self.send(notification_frame(method, params))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._end_input()
        self.gone.set()
        if self._group is not None:
            self._group.cancel_scope.cancel()
        self._cancel_calls()
        if self._transport is not None:
            with contextlib.suppress(Exception):
                self._transport.close()
            with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
                await self._lost.wait()
            if not self._lost.is_set():
                self._transport.abort()  # a peer that reads nothing more is not waited for
