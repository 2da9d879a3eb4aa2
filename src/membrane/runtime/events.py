"""Lifecycle events: to the store (durable) and to every host subscribed through ``events()``.

Kinds: ``published``, ``turn``, ``usage``, ``model_note``, ``model_attempt_failed`` (a
model of a fallback chain failed and the next was tried), ``tool_call``, ``tool_result``,
``vetoed_call``, ``hook`` (a command hook ran), ``completed``, ``error``, ``stopped``. An event
exists only for a published child; the unpublished setup of a child emits nothing, so no
observer ever sees a half-built child.

The store write comes first and gives the event its ``seq``; a stream sees an event once that
write has committed, in ``seq`` order. Delivery never blocks the emitting child (each
subscription buffers without bound, and a subscription that was closed is dropped).

Degraded mode: when the store refuses a write (``StoreError``), the events it held are still
delivered, with ``seq`` 0, which means "not durable": a batch of queued events the writer could
not store, and a run's terminal event when its final write failed. The failure is kept in
``EventHub.errors``. Publication is the exception: a child whose publication cannot be stored
is not started, so its ``published`` event is never delivered.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, TypeVar

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from membrane.errors import StoreError
from membrane.json_types import JSONDict
from membrane.store.base import Store

T = TypeVar("T")

__all__ = [
    "EVENT_KINDS",
    "MAX_BATCH",
    "MAX_DELAY",
    "TERMINAL_KINDS",
    "WRITE_DELAY",
    "EventHub",
    "EventStream",
    "LifecycleEvent",
]

EVENT_KINDS: Final = frozenset(
    {
        "published",
        "turn",
        "usage",
        "model_note",
        "model_attempt_failed",
        "tool_call",
        "tool_result",
        "vetoed_call",
        "hook",
        "agent_update",
        "completed",
        "error",
        "stopped",
    }
)
TERMINAL_KINDS: Final = frozenset({"completed", "error", "stopped"})
#: The most events the hub queues before the emitting call writes them itself.
MAX_BATCH: Final = 256
#: The longest, in seconds, a queued event waits before the next emitting call writes it.
MAX_DELAY: Final = 0.05
#: How long, in seconds, the writer lets queued events wait for a commit to join.
WRITE_DELAY: Final = 0.005


def _nothing() -> None:
    return None


@dataclass(frozen=True, slots=True)
class LifecycleEvent:
    """One event of one run. ``seq`` is the store's sequence number for it."""

    seq: int
    run_id: str
    parent_id: str | None
    agent: str
    kind: str
    # Any: readers take known keys per ``kind`` (the CLI renders them); a JSON type would make
    # each narrow a value the event's kind already fixes.
    data: Mapping[str, Any] = field(default_factory=dict)
    at: float = 0.0

    def to_dict(self) -> JSONDict:
        return {
            "seq": self.seq,
            "run_id": self.run_id,
            "parent_id": self.parent_id,
            "agent": self.agent,
            "kind": self.kind,
            "data": dict(self.data),
            "at": self.at,
        }


class EventStream:
    """An async iterator over events published after it was opened.

    Use ``async with runtime.events() as stream: async for event in stream: ...``, or iterate
    directly and call ``close()`` when done. Iteration ends when the runtime closes.
    """

    def __init__(self, hub: EventHub) -> None:
        self._hub = hub
        send, receive = anyio.create_memory_object_stream[LifecycleEvent](math.inf)
        self._send: MemoryObjectSendStream[LifecycleEvent] = send
        self._receive: MemoryObjectReceiveStream[LifecycleEvent] = receive

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> LifecycleEvent:
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop receiving; events already buffered are dropped."""
        self._hub.unsubscribe(self)
        self._send.close()
        self._receive.close()

    def _offer(self, event: LifecycleEvent) -> bool:
        try:
            self._send.send_nowait(event)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    def _end(self) -> None:
        self._send.close()


class _Pending:
    """An event queued for the writer, until its write gives it a ``seq``. Private and never
    changed once made; a plain slotted class, since a frozen one pays a call per field set."""

    __slots__ = ("agent", "at", "data", "kind", "parent_id", "run_id")

    def __init__(
        self,
        run_id: str,
        parent_id: str | None,
        agent: str,
        kind: str,
        data: Mapping[str, Any],
        at: float,
    ) -> None:
        self.run_id = run_id
        self.parent_id = parent_id
        self.agent = agent
        self.kind = kind
        self.data = data
        self.at = at


class EventHub:
    """Writes events to the store in order, then offers them to every open ``EventStream``.

    Events a running child reports (``turn``, ``tool_call``...) are written behind: ``post()``
    queues them and never blocks the child, and the queue is written in one transaction by the
    next ``commit()`` or, when none comes within ``write_delay`` seconds (``WRITE_DELAY``), by
    the hub's writer task (and by ``post()``
    itself past ``MAX_BATCH`` events or ``MAX_DELAY`` seconds). ``commit()`` runs the
    runtime's own writes (publication, a run's end) in the same transaction, after the queue,
    so ``seq`` order is emission order and a run's end is durable with everything before it.
    """

    def __init__(self, store: Store, *, write_delay: float = WRITE_DELAY) -> None:
        self._store = store
        self._write_delay = write_delay
        self._stopping: anyio.Event | None = None
        self._streams: list[EventStream] = []
        self._pending: list[_Pending] = []
        self._wakeup: anyio.Event | None = None
        self._closed = False
        #: True while ``commit()`` runs, so that events its work posts wait for the writer.
        self._committing = False
        #: Store failures met while writing queued events (they were still delivered, seq 0).
        self.errors: list[StoreError] = []

    @property
    def closed(self) -> bool:
        return self._closed

    def subscribe(self) -> EventStream:
        stream = EventStream(self)
        if self._closed:
            stream._end()
        else:
            self._streams.append(stream)
        return stream

    def unsubscribe(self, stream: EventStream) -> None:
        if stream in self._streams:
            self._streams.remove(stream)

    def post(
        self,
        *,
        run_id: str,
        parent_id: str | None,
        agent: str,
        kind: str,
        data: Mapping[str, Any],
    ) -> None:
        """Queue an event for the writer; it reaches the store and the streams shortly.

        "Shortly" is bounded even when the emitting child never lets the writer run (a model
        or tool that never awaits): once the queue holds ``MAX_BATCH`` events, or its oldest
        is ``MAX_DELAY`` seconds old, this call writes it itself."""
        now = time.time()
        pending = self._pending
        pending.append(_Pending(run_id, parent_id, agent, kind, dict(data), now))
        if not self._committing and (len(pending) >= MAX_BATCH or now - pending[0].at >= MAX_DELAY):
            self.flush()
        elif self._wakeup is not None:
            self._wakeup.set()

    def commit(self, work: Callable[[], T]) -> T:
        """Write the queued events, then ``work()``, in one store transaction; deliver the
        queued events once it commits. ``work`` may add events and deliver them afterwards."""
        batch = self._pending
        if batch:
            self._pending = []
        committing, self._committing = self._committing, True
        store = self._store
        try:
            with store.transaction():
                seqs = [store.append_event(p.run_id, p.kind, p.data) for p in batch]
                result = work()
        except BaseException:
            if batch:
                self._pending[:0] = batch
            raise
        finally:
            self._committing = committing
        if batch:
            for pending, seq in zip(batch, seqs, strict=True):
                self._deliver(pending, seq)
        return result

    def flush(self, work: Callable[[], object] | None = None) -> None:
        """Write and deliver everything queued, with ``work()`` (writes that must not fail the
        caller, such as a turn's transcript) in the same transaction; a store failure is kept
        in ``errors`` and the events are still delivered (seq 0)."""
        if not self._pending and work is None:
            return
        try:
            self.commit(work or _nothing)
        except StoreError as exc:
            batch, self._pending = self._pending, []
            self.errors.append(exc)
            for pending in batch:
                self._deliver(pending, 0)

    async def writer(self) -> None:
        """Write queued events until ``close()``; run it in the runtime's task group."""
        self._stopping = stopping = anyio.Event()
        while not self._closed:
            self._wakeup = anyio.Event()
            if not self._pending:
                await self._wakeup.wait()
            # Queued events join the next ``commit()`` (a publication, a turn's end) that comes
            # within ``WRITE_DELAY``, with the events of concurrent children; only past it does
            # the writer spend a transaction of its own on them.
            with anyio.move_on_after(self._write_delay):
                await stopping.wait()  # ``close()`` cuts the wait short
            self.flush()
        self.flush()

    def deliver(
        self,
        *,
        seq: int,
        run_id: str,
        parent_id: str | None,
        agent: str,
        kind: str,
        data: Mapping[str, Any],
    ) -> None:
        """Offer an event the store already holds (as ``seq``) to every open stream."""
        if self._streams:  # with no stream open, no event is made
            self._offer(LifecycleEvent(seq, run_id, parent_id, agent, kind, data, time.time()))

    def _deliver(self, pending: _Pending, seq: int) -> None:
        if self._streams:
            self._offer(
                LifecycleEvent(
                    seq,
                    pending.run_id,
                    pending.parent_id,
                    pending.agent,
                    pending.kind,
                    pending.data,
                    pending.at,
                )
            )

    def _offer(self, event: LifecycleEvent) -> None:
        self._streams = [s for s in self._streams if s._offer(event)]

    def close(self) -> None:
        """Write what is queued, stop the writer and end every stream's iteration."""
        self.flush()
        self._closed = True
        if self._wakeup is not None:
            self._wakeup.set()
        if self._stopping is not None:
            self._stopping.set()
        for stream in self._streams:
            stream._end()
        self._streams.clear()
