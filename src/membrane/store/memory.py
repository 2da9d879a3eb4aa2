"""``MemoryStore``: the ``Store`` protocol held in memory, for tests and throwaway runs.

It has the same semantics as ``SQLiteStore`` (the contract tests run against both): the same
errors, JSON round-tripping of every mapping (so what comes back is a fresh copy and a value
JSON cannot carry is refused on write), strictly increasing, never reused sequence numbers,
cascading ``delete_session`` and savepoint-style nested transactions. Only durability differs.

The rows a live child keeps (its session, its events, its lease) are held as tuples of atomic
values, their mappings as the JSON text a read decodes: the garbage collector stops tracking
such a tuple at its first pass, so however many children are live, their rows add nothing to
what its full passes follow (a header, its ``meta``, an event and the lists and mappings of its
data would be about nine tracked objects per child).

Every single method validates before it changes anything, so it is atomic on its own. Inside
an explicit ``transaction()`` each change also records how to undo itself (an undo log), and a
block that raises replays its part of the log backwards: a transaction costs what it changes,
never a copy of the state.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Final, TypeVar, Unpack

from membrane.errors import StoreError
from membrane.json_types import JSONDict, JSONObject
from membrane.store.base import (
    BUDGET_KEY,
    EdgeStatus,
    LineageEdge,
    NewEdge,
    OutboxItem,
    Receipt,
    SessionHeader,
    Store,
    StoredEvent,
)
from membrane.store.memory_durable import DurableState, MemoryDurable
from membrane.store.rows import (
    check_edge_status,
    check_start,
    dump_json,
    dump_messages,
    edge_ended,
    edge_exists,
    ledger_of,
    loadable_edges,
    missing,
    session_depth,
)

__all__ = ["MemoryStore"]

_T = TypeVar("_T")


#: A stored session: ``SessionHeader``'s fields in order, ``meta`` and ``result`` as JSON text
#: (``result`` ``None`` until ``set_status`` gives one).
_Session = tuple[str, str, str | None, int, str, str, float, str | None, str, str | None]
#: A stored event: ``StoredEvent``'s fields in order, ``data`` as JSON text.
_Event = tuple[int, str, str, str, float]

#: Where ``_Session`` holds the fields a change or a filter reads.
_PARENT: Final = 2
_STATUS: Final = 4
_CREATED: Final = 6
_META: Final = 8
_RESULT: Final = 9


def _header(row: _Session) -> SessionHeader:
    """A fresh ``SessionHeader`` of a stored row (its mappings decoded anew)."""
    session_id, agent, parent_id, depth, status, provider, created_at, request_id, meta, result = (
        row
    )
    return SessionHeader(
        session_id,
        agent,
        parent_id,
        depth,
        status,
        provider,
        created_at,
        request_id,
        json.loads(meta),
        None if result is None else json.loads(result),
    )


def _event(row: _Event) -> StoredEvent:
    return StoredEvent(row[0], row[1], row[2], json.loads(row[3]), row[4])


@dataclass(slots=True)
class _State:
    sessions: dict[str, _Session] = field(default_factory=dict)
    events: list[_Event] = field(default_factory=list)
    last_seq: int = 0
    receipts: dict[str, Receipt] = field(default_factory=dict)
    outbox: dict[int, OutboxItem] = field(default_factory=dict)
    last_outbox_id: int = 0
    edges: dict[str, LineageEdge] = field(default_factory=dict)
    #: Transcripts as JSON text per message; an append extends the list in place.
    transcripts: dict[str, list[str]] = field(default_factory=dict)
    schedules: dict[str, dict[str, Any]] = field(default_factory=dict)
    durable: DurableState = field(default_factory=DurableState)


def _normalise(value: Mapping[str, Any], *, what: str) -> dict[str, Any]:
    """What SQLite would give back after storing ``value`` as JSON."""
    loaded: dict[str, Any] = json.loads(_text(value, what=what))
    return loaded


def _text(value: Mapping[str, Any], *, what: str) -> str:
    """``value`` as the JSON text stored for it (a value JSON cannot carry is refused)."""
    return dump_json(value, what=what) or "{}"


def _same(edge: LineageEdge) -> LineageEdge:
    return edge


def _fresh(value: _T) -> _T:
    return copy.deepcopy(value)


#: Marks a key that was absent before a change (so undoing it removes the key).
_ABSENT: Final = object()


def _restore(table: dict[Any, Any], key: object, old: object) -> Callable[[], None]:
    def undo() -> None:
        if old is _ABSENT:
            table.pop(key, None)
        else:
            table[key] = old

    return undo


class MemoryStore(MemoryDurable, Store):
    """A ``Store`` in memory. ``clock`` stamps rows (seconds since the epoch)."""

    remote = False

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._state = _State()
        self._closed = False
        #: How to undo each change of the open transaction, oldest first (``None``: no
        #: transaction is open, so nothing is recorded).
        self._undo: list[Callable[[], None]] | None = None

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
        with self._open("transaction"):
            outer = self._undo is None
            if outer:
                self._undo = []
            log = self._undo
            assert log is not None
            mark = len(log)
            try:
                yield
            except BaseException:
                while len(log) > mark:
                    log.pop()()
                raise
            finally:
                if outer:
                    self._undo = None

    # -- changes that can be undone ------------------------------------------------------------

    def _put(self, table: dict[Any, Any], key: object, value: object) -> None:
        if self._undo is not None:
            self._undo.append(_restore(table, key, table.get(key, _ABSENT)))
        table[key] = value

    def _drop(self, table: dict[Any, Any], key: object) -> Any:
        old = table.pop(key, _ABSENT)
        if old is _ABSENT:
            return None
        if self._undo is not None:
            self._undo.append(_restore(table, key, old))
        return old

    def _counter(self, state: _State, name: str) -> int:
        """Raise ``state.<name>`` by one and return it (undone with the transaction)."""
        old: int = getattr(state, name)
        if self._undo is not None:
            self._undo.append(lambda: setattr(state, name, old))
        setattr(state, name, old + 1)
        return old + 1

    async def barrier(self) -> None:
        """Nothing to wait for: memory is never durable, so nothing waits on a disk."""

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions and events ------------------------------------------------------------------

    def create_session(self, header: SessionHeader) -> None:
        session_id = header.session_id
        session_depth(header.delegation_depth, session_id=session_id, stored=False)
        meta = _text(header.meta, what=f"meta of session {session_id!r}")
        result = None
        if header.result is not None:
            result = _text(header.result, what=f"result of session {session_id!r}")
        with self._open("create_session") as state:
            if session_id in state.sessions:
                raise StoreError(
                    f"session {session_id!r} already exists; session ids are unique",
                    session_id=session_id,
                )
            row: _Session = (
                session_id,
                header.agent,
                header.parent_id,
                header.delegation_depth,
                header.status,
                header.provider,
                header.created_at or self._clock(),
                header.request_id,
                meta,
                result,
            )
            self._put(state.sessions, session_id, row)

    def get_header(self, session_id: str) -> SessionHeader | None:
        with self._open("get_header") as state:
            row = state.sessions.get(session_id)
        return None if row is None else _header(row)

    def set_status(self, session_id: str, status: str, *, result: JSONObject | None = None) -> None:
        encoded = None
        if result is not None:
            encoded = _text(result, what=f"result of session {session_id!r}")
        with self._open("set_status") as state:
            row = state.sessions.get(session_id)
            if row is None:
                raise missing("session", session_id)
            kept = row[_RESULT] if encoded is None else encoded
            self._put(state.sessions, session_id, (*row[:_STATUS], status, *row[5:_RESULT], kept))

    def list_sessions(self, *, parent_id: str | None = None) -> list[SessionHeader]:
        with self._open("list_sessions") as state:
            found = [
                row
                for row in state.sessions.values()
                if parent_id is None or row[_PARENT] == parent_id
            ]
        # sorted() is stable, so equal timestamps keep insertion order, as rowid does in SQLite.
        found.sort(key=lambda row: row[_CREATED])
        return [_header(row) for row in found]

    def page_sessions(
        self,
        *,
        limit: int,
        after: str | None = None,
        parent_id: str | None = None,
        meta: tuple[str, str] | None = None,
    ) -> list[SessionHeader]:
        found: list[SessionHeader] = []
        with self._open("page_sessions") as state:
            if after is not None and after not in state.sessions:
                raise missing("session", after)
            rows = iter(state.sessions.values())
            if after is not None:
                for row in rows:  # insertion order, as rowid in SQLite
                    if row[0] == after:
                        break
            for row in rows:
                if len(found) >= limit:
                    break
                if parent_id is not None and row[_PARENT] != parent_id:
                    continue
                header = _header(row)
                if meta is not None and header.meta.get(meta[0]) != meta[1]:
                    continue
                found.append(header)
        return found

    def append_event(self, session_id: str, kind: str, data: JSONObject) -> int:
        encoded = _text(data, what=f"data of event {kind!r}")
        with self._open("append_event") as state:
            if session_id not in state.sessions:
                raise missing("session", session_id)
            seq = self._counter(state, "last_seq")
            events = state.events
            events.append((seq, session_id, kind, encoded, self._clock()))
            if self._undo is not None:
                self._undo.append(lambda: events.__delitem__(-1))
            return seq

    def events(self, *, session_id: str | None = None, after: int = 0) -> list[StoredEvent]:
        with self._open("events") as state:
            found = [
                row
                for row in state.events
                if row[0] > after and (session_id is None or row[1] == session_id)
            ]
        return [_event(row) for row in found]

    def update_meta(self, session_id: str, values: JSONObject) -> None:
        update = _normalise(values, what=f"meta update of session {session_id!r}")
        with self._open("update_meta") as state:
            row = state.sessions.get(session_id)
            if row is None:
                raise missing("session", session_id)
            meta = _text({**json.loads(row[_META]), **update}, what="meta")
            self._put(state.sessions, session_id, (*row[:_META], meta, row[_RESULT]))

    # -- budget ledgers ----------------------------------------------------------------------

    def lock_ledger(self, owner: str) -> JSONDict | None:
        with self._open("lock_ledger") as state:
            row = state.sessions.get(owner)
        if row is None:
            return None
        return ledger_of(json.loads(row[_META]))

    def write_ledger(self, owner: str, ledger: JSONObject) -> None:
        with self._open("write_ledger") as state:
            if owner in state.sessions:
                self.update_meta(owner, {BUDGET_KEY: ledger})

    # -- transcripts --------------------------------------------------------------------------

    def append_messages(
        self, session_id: str, messages: Sequence[JSONObject], *, start: int
    ) -> int:
        encoded = dump_messages(messages, session_id=session_id, start=start)
        with self._open("append_messages") as state:
            length = len(self._transcript(state, session_id))
            check_start(start, session_id=session_id, length=length)
            stored = state.transcripts.get(session_id)
            if stored is None:
                stored = []
                self._put(state.transcripts, session_id, stored)
            stored.extend(encoded)
            if self._undo is not None:
                self._undo.append(lambda: stored.__delitem__(slice(length, None)))
            return len(stored)

    def transcript(self, session_id: str) -> list[JSONDict]:
        with self._open("transcript") as state:
            stored = tuple(self._transcript(state, session_id))
        return [json.loads(text) for text in stored]

    def transcript_length(self, session_id: str) -> int:
        with self._open("transcript_length") as state:
            return len(self._transcript(state, session_id))

    @staticmethod
    def _transcript(state: _State, session_id: str) -> Sequence[str]:
        if session_id not in state.sessions:
            raise missing("session", session_id)
        return state.transcripts.get(session_id, ())

    # -- receipts -----------------------------------------------------------------------------

    def begin_receipt(
        self, request_id: str, *, kind: str, owner: str | None = None
    ) -> Receipt | None:
        with self._open("begin_receipt") as state:
            existing = state.receipts.get(request_id)
            if existing is None:
                self._put(
                    state.receipts,
                    request_id,
                    Receipt(request_id, kind, "pending", None, self._clock(), owner=owner),
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
            self._put(state.receipts, request_id, receipt)
            return _fresh(receipt)

    def get_receipt(self, request_id: str) -> Receipt | None:
        with self._open("get_receipt") as state:
            return _fresh(state.receipts.get(request_id))

    def release_receipt(self, request_id: str, *, owner: str | None = None) -> None:
        with self._open("release_receipt") as state:
            receipt = state.receipts.get(request_id)
            if receipt is None or (owner is not None and receipt.owner != owner):
                return
            if receipt.status != "pending":
                raise StoreError(
                    f"receipt {request_id!r} is completed, so it cannot be released; replay "
                    "its result instead",
                    request_id=request_id,
                )
            self._drop(state.receipts, request_id)

    def reap_pending_receipts(
        self, *, older_than: float, owners: Collection[str] = (), spare: Collection[str] = ()
    ) -> list[str]:
        with self._open("reap_pending_receipts") as state:
            stale = sorted(
                rid
                for rid, receipt in state.receipts.items()
                if receipt.status == "pending"
                and (
                    (receipt.created_at < older_than and receipt.owner not in spare)
                    or receipt.owner in owners
                )
            )
            for rid in stale:
                self._drop(state.receipts, rid)
            return stale

    def pending_receipt_owners(self) -> list[str]:
        with self._open("pending_receipt_owners") as state:
            return sorted(
                {
                    receipt.owner
                    for receipt in state.receipts.values()
                    if receipt.status == "pending" and receipt.owner is not None
                }
            )

    # -- outbox -------------------------------------------------------------------------------

    def enqueue_outbox(
        self, recipient: str, payload: JSONObject, *, not_before: float | None = None
    ) -> int:
        encoded = _normalise(payload, what=f"outbox payload for {recipient!r}")
        with self._open("enqueue_outbox") as state:
            now = self._clock()
            item_id = self._counter(state, "last_outbox_id")
            due = now if not_before is None else not_before
            self._put(state.outbox, item_id, OutboxItem(item_id, recipient, encoded, 0, due, now))
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
            self._put(state.outbox, item_id, item)
            return _fresh(item)

    def mark_delivered(self, item_id: int) -> None:
        with self._open("mark_delivered") as state:
            item = state.outbox.get(item_id)
            if item is None:
                raise missing("outbox item", item_id)
            if item.delivered_at is None:
                self._put(state.outbox, item_id, replace(item, delivered_at=self._clock()))

    # -- lineage ------------------------------------------------------------------------------

    def record_edge(self, **edge: Unpack[NewEdge]) -> LineageEdge:
        child_id = edge["child_id"]
        fingerprint = _normalise(
            edge["spawn_fingerprint"], what=f"spawn fingerprint of {child_id!r}"
        )
        with self._open("record_edge") as state:
            if child_id in state.edges:
                raise edge_exists(child_id)
            if child_id not in state.sessions:
                raise missing("session", child_id)
            stored = LineageEdge(**edge, status="running", created_at=self._clock())
            stored = replace(stored, spawn_fingerprint=fingerprint)
            self._put(state.edges, child_id, stored)
            return _fresh(stored)

    def complete_edge(
        self, child_id: str, *, status: EdgeStatus, result_summary: str | None = None
    ) -> LineageEdge:
        check_edge_status(status)
        with self._open("complete_edge") as state:
            edge = state.edges.get(child_id)
            if edge is None:
                raise missing("lineage edge", child_id)
            if edge.status != "running":
                raise edge_ended(edge)
            edge = replace(
                edge, status=status, result_summary=result_summary, completed_at=self._clock()
            )
            self._put(state.edges, child_id, edge)
            return _fresh(edge)

    def edges(self, *, parent_id: str | None = None) -> list[LineageEdge]:
        with self._open("edges") as state:
            found = [
                edge
                for edge in state.edges.values()
                if parent_id is None or edge.parent_id == parent_id
            ]
        return loadable_edges(_fresh(sorted(found, key=lambda edge: edge.created_at)), _same)

    # -- schedules ----------------------------------------------------------------------------

    def put_schedule(self, schedule_id: str, record: JSONObject) -> None:
        value = _normalise(record, what=f"schedule {schedule_id!r}")
        with self._open("put_schedule") as state:
            self._put(state.schedules, schedule_id, value)

    def get_schedule(self, schedule_id: str) -> JSONDict | None:
        with self._open("get_schedule") as state:
            return _fresh(state.schedules.get(schedule_id))

    def list_schedules(self) -> list[JSONDict]:
        with self._open("list_schedules") as state:
            return [_fresh(state.schedules[key]) for key in sorted(state.schedules)]

    def delete_schedule(self, schedule_id: str) -> bool:
        with self._open("delete_schedule") as state:
            return self._drop(state.schedules, schedule_id) is not None
