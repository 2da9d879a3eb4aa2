"""``MemoryStore``: the ``Store`` protocol held in memory, for tests and throwaway runs.

It has the same semantics as ``SQLiteStore`` (the contract tests run against both): the same
errors, JSON round-tripping of every mapping (so what comes back is a fresh copy and a value
JSON cannot carry is refused on write), strictly increasing, never reused sequence numbers,
cascading ``delete_session`` and savepoint-style nested transactions. Only durability differs.

Every single method validates before it changes anything, so it is atomic on its own; an
explicit ``transaction()`` snapshots the containers and restores them if its block raises.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from membrane.errors import StoreError
from membrane.json_types import JSONDict, JSONObject
from membrane.store.base import (
    EdgeStatus,
    LineageEdge,
    OutboxItem,
    Receipt,
    SessionHeader,
    Store,
    StoredEvent,
    check_depth,
    check_edge_status,
    check_start,
    dump_json,
    dump_messages,
    missing,
)

__all__ = ["MemoryStore"]

_T = TypeVar("_T")


@dataclass(slots=True)
class _State:
    sessions: dict[str, SessionHeader] = field(default_factory=dict)
    events: list[StoredEvent] = field(default_factory=list)
    last_seq: int = 0
    receipts: dict[str, Receipt] = field(default_factory=dict)
    outbox: dict[int, OutboxItem] = field(default_factory=dict)
    last_outbox_id: int = 0
    edges: dict[str, LineageEdge] = field(default_factory=dict)
    #: Transcripts as JSON text per message; an append replaces the tuple.
    transcripts: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def snapshot(self) -> _State:
        # Stored values are frozen and their mappings are never mutated, so copying the
        # containers is enough.
        return _State(
            dict(self.sessions),
            list(self.events),
            self.last_seq,
            dict(self.receipts),
            dict(self.outbox),
            self.last_outbox_id,
            dict(self.edges),
            dict(self.transcripts),
        )


def _normalise(value: Mapping[str, Any], *, what: str) -> dict[str, Any]:
    """What SQLite would give back after storing ``value`` as JSON."""
    loaded: dict[str, Any] = json.loads(dump_json(value, what=what) or "{}")
    return loaded


def _fresh(value: _T) -> _T:
    return copy.deepcopy(value)


class MemoryStore(Store):
    """A ``Store`` in memory. ``clock`` stamps rows (seconds since the epoch)."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._state = _State()
        self._closed = False

    @contextmanager
    def _open(self, action: str) -> Iterator[_State]:
        with self._lock:
            if self._closed:
                raise StoreError(f"{action}: the memory store is closed")
            yield self._state

    def transaction(self) -> AbstractContextManager[None]:
        return self._transaction()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._open("transaction") as state:
            saved = state.snapshot()
            try:
                yield
            except BaseException:
                self._state = saved
                raise

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions and events ------------------------------------------------------------------

    def create_session(self, header: SessionHeader) -> None:
        check_depth(header.delegation_depth, session_id=header.session_id, stored=False)
        meta = _normalise(header.meta, what=f"meta of session {header.session_id!r}")
        result = None
        if header.result is not None:
            result = _normalise(header.result, what=f"result of session {header.session_id!r}")
        with self._open("create_session") as state:
            if header.session_id in state.sessions:
                raise StoreError(
                    f"session {header.session_id!r} already exists; session ids are unique",
                    session_id=header.session_id,
                )
            state.sessions[header.session_id] = replace(
                header, created_at=header.created_at or self._clock(), meta=meta, result=result
            )

    def get_header(self, session_id: str) -> SessionHeader | None:
        with self._open("get_header") as state:
            return _fresh(state.sessions.get(session_id))

    def set_status(self, session_id: str, status: str, *, result: JSONObject | None = None) -> None:
        encoded = None
        if result is not None:
            encoded = _normalise(result, what=f"result of session {session_id!r}")
        with self._open("set_status") as state:
            header = state.sessions.get(session_id)
            if header is None:
                raise missing("session", session_id)
            state.sessions[session_id] = replace(
                header, status=status, result=header.result if encoded is None else encoded
            )

    def list_sessions(self, *, parent_id: str | None = None) -> list[SessionHeader]:
        with self._open("list_sessions") as state:
            found = [
                header
                for header in state.sessions.values()
                if parent_id is None or header.parent_id == parent_id
            ]
        # sorted() is stable, so equal timestamps keep insertion order, as rowid does in SQLite.
        return _fresh(sorted(found, key=lambda header: header.created_at))

    def append_event(self, session_id: str, kind: str, data: JSONObject) -> int:
        encoded = _normalise(data, what=f"data of event {kind!r}")
        with self._open("append_event") as state:
            if session_id not in state.sessions:
                raise missing("session", session_id)
            state.last_seq += 1
            state.events.append(
                StoredEvent(state.last_seq, session_id, kind, encoded, self._clock())
            )
            return state.last_seq

    def events(self, *, session_id: str | None = None, after: int = 0) -> list[StoredEvent]:
        with self._open("events") as state:
            found = [
                event
                for event in state.events
                if event.seq > after and (session_id is None or event.session_id == session_id)
            ]
        return _fresh(found)

    def delete_session(self, session_id: str) -> None:
        with self._open("delete_session") as state:
            if state.sessions.pop(session_id, None) is None:
                return
            state.events = [event for event in state.events if event.session_id != session_id]
            state.edges.pop(session_id, None)
            state.transcripts.pop(session_id, None)

    def update_meta(self, session_id: str, values: JSONObject) -> None:
        update = _normalise(values, what=f"meta update of session {session_id!r}")
        with self._open("update_meta") as state:
            header = state.sessions.get(session_id)
            if header is None:
                raise missing("session", session_id)
            state.sessions[session_id] = replace(header, meta={**header.meta, **update})

    # -- transcripts --------------------------------------------------------------------------

    def append_messages(
        self, session_id: str, messages: Sequence[JSONObject], *, start: int
    ) -> int:
        encoded = dump_messages(messages, session_id=session_id, start=start)
        with self._open("append_messages") as state:
            stored = self._transcript(state, session_id)
            check_start(start, session_id=session_id, length=len(stored))
            state.transcripts[session_id] = (*stored, *encoded)
            return len(stored) + len(encoded)

    def transcript(self, session_id: str) -> list[JSONDict]:
        with self._open("transcript") as state:
            stored = self._transcript(state, session_id)
        return [json.loads(text) for text in stored]

    def transcript_length(self, session_id: str) -> int:
        with self._open("transcript_length") as state:
            return len(self._transcript(state, session_id))

    @staticmethod
    def _transcript(state: _State, session_id: str) -> tuple[str, ...]:
        if session_id not in state.sessions:
            raise missing("session", session_id)
        return state.transcripts.get(session_id, ())

    # -- receipts -----------------------------------------------------------------------------

    def begin_receipt(self, request_id: str, *, kind: str) -> Receipt | None:
        with self._open("begin_receipt") as state:
            existing = state.receipts.get(request_id)
            if existing is None:
                state.receipts[request_id] = Receipt(
                    request_id, kind, "pending", None, self._clock()
                )
                return None
            if existing.kind != kind:
                raise StoreError(
                    f"request id {request_id!r} was used for a {existing.kind!r}, "
                    f"not a {kind!r}; request ids must be unique per action",
                    request_id=request_id,
                    kind=existing.kind,
                )
            return _fresh(existing)

    def complete_receipt(self, request_id: str, result: JSONObject) -> Receipt:
        encoded = _normalise(result, what=f"result of request {request_id!r}")
        with self._open("complete_receipt") as state:
            receipt = state.receipts.get(request_id)
            if receipt is None:
                raise missing("receipt", request_id)
            if receipt.status != "pending":
                raise StoreError(
                    f"receipt {request_id!r} is already completed; replay its result instead",
                    request_id=request_id,
                )
            receipt = replace(
                receipt, status="completed", result=encoded, completed_at=self._clock()
            )
            state.receipts[request_id] = receipt
            return _fresh(receipt)

    def get_receipt(self, request_id: str) -> Receipt | None:
        with self._open("get_receipt") as state:
            return _fresh(state.receipts.get(request_id))

    def release_receipt(self, request_id: str) -> None:
        with self._open("release_receipt") as state:
            receipt = state.receipts.get(request_id)
            if receipt is None:
                return
            if receipt.status != "pending":
                raise StoreError(
                    f"receipt {request_id!r} is completed, so it cannot be released; replay "
                    "its result instead",
                    request_id=request_id,
                )
            del state.receipts[request_id]

    def reap_pending_receipts(self, *, older_than: float) -> list[str]:
        with self._open("reap_pending_receipts") as state:
            stale = sorted(
                rid
                for rid, receipt in state.receipts.items()
                if receipt.status == "pending" and receipt.created_at < older_than
            )
            for rid in stale:
                del state.receipts[rid]
            return stale

    # -- outbox -------------------------------------------------------------------------------

    def enqueue_outbox(
        self, recipient: str, payload: JSONObject, *, not_before: float | None = None
    ) -> int:
        encoded = _normalise(payload, what=f"outbox payload for {recipient!r}")
        with self._open("enqueue_outbox") as state:
            now = self._clock()
            state.last_outbox_id += 1
            item_id = state.last_outbox_id
            due = now if not_before is None else not_before
            state.outbox[item_id] = OutboxItem(item_id, recipient, encoded, 0, due, now)
            return item_id

    def due_outbox(self, *, now: float | None = None, limit: int = 100) -> list[OutboxItem]:
        if limit < 1:
            raise StoreError(f"due_outbox limit must be at least 1, got {limit}", limit=limit)
        with self._open("due_outbox") as state:
            moment = self._clock() if now is None else now
            due = [
                item
                for item in state.outbox.values()
                if item.delivered_at is None and item.next_attempt_at <= moment
            ]
        return _fresh(sorted(due, key=lambda item: item.id)[:limit])

    def pending_outbox(self, *, recipient: str | None = None, limit: int = 100) -> list[OutboxItem]:
        if limit < 1:
            raise StoreError(f"pending_outbox limit must be at least 1, got {limit}", limit=limit)
        with self._open("pending_outbox") as state:
            pending = [
                item
                for item in state.outbox.values()
                if item.delivered_at is None and recipient in (None, item.recipient)
            ]
        return _fresh(sorted(pending, key=lambda item: item.id)[:limit])

    def next_outbox_attempt(self) -> float | None:
        with self._open("next_outbox_attempt") as state:
            due = [i.next_attempt_at for i in state.outbox.values() if i.delivered_at is None]
        return min(due, default=None)

    def mark_attempt(self, item_id: int, *, next_attempt_at: float) -> OutboxItem:
        with self._open("mark_attempt") as state:
            item = state.outbox.get(item_id)
            if item is None:
                raise missing("outbox item", item_id)
            if item.delivered_at is not None:
                raise StoreError(f"outbox item {item_id} is already delivered", item_id=item_id)
            item = replace(item, attempts=item.attempts + 1, next_attempt_at=next_attempt_at)
            state.outbox[item_id] = item
            return _fresh(item)

    def mark_delivered(self, item_id: int) -> None:
        with self._open("mark_delivered") as state:
            item = state.outbox.get(item_id)
            if item is None:
                raise missing("outbox item", item_id)
            if item.delivered_at is None:
                state.outbox[item_id] = replace(item, delivered_at=self._clock())

    # -- lineage ------------------------------------------------------------------------------

    def record_edge(
        self,
        *,
        parent_id: str,
        child_id: str,
        child_role: str,
        brief_digest: str,
        spawn_fingerprint: JSONObject,
    ) -> LineageEdge:
        fingerprint = _normalise(spawn_fingerprint, what=f"spawn fingerprint of {child_id!r}")
        with self._open("record_edge") as state:
            if child_id in state.edges:
                raise StoreError(
                    f"session {child_id!r} already has a lineage edge; a child has one parent",
                    child_id=child_id,
                )
            if child_id not in state.sessions:
                raise missing("session", child_id)
            edge = LineageEdge(
                parent_id=parent_id,
                child_id=child_id,
                child_role=child_role,
                brief_digest=brief_digest,
                spawn_fingerprint=fingerprint,
                status="running",
                created_at=self._clock(),
            )
            state.edges[child_id] = edge
            return _fresh(edge)

    def complete_edge(
        self, child_id: str, *, status: EdgeStatus, result_summary: str | None = None
    ) -> LineageEdge:
        check_edge_status(status)
        with self._open("complete_edge") as state:
            edge = state.edges.get(child_id)
            if edge is None:
                raise missing("lineage edge", child_id)
            if edge.status != "running":
                raise StoreError(
                    f"the lineage edge of {child_id!r} already ended as {edge.status!r}",
                    child_id=child_id,
                    status=edge.status,
                )
            edge = replace(
                edge, status=status, result_summary=result_summary, completed_at=self._clock()
            )
            state.edges[child_id] = edge
            return _fresh(edge)

    def edges(self, *, parent_id: str | None = None) -> list[LineageEdge]:
        with self._open("edges") as state:
            found = [
                edge
                for edge in state.edges.values()
                if parent_id is None or edge.parent_id == parent_id
            ]
        return _fresh(sorted(found, key=lambda edge: edge.created_at))
