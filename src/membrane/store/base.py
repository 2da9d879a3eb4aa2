"""The ``Store`` protocol, split by concern, and the values it holds.

A store keeps what must survive a crash or a restart: session headers (with the durable
``delegation_depth`` that seed 001 requires) and lifecycle events, run leases, each run's
transcript (so a resume continues the conversation), idempotency receipts, the delivery
outbox, the delegation lineage ledger, budget ledgers, schedules and workflow state. Each
concern is a protocol of its own (``RunStore``, ``LeaseStore``, ``TranscriptStore``,
``ReceiptStore``, ``OutboxStore``, ``LineageStore``, ``BudgetStore``, ``ScheduleStore``,
``WorkflowStore``); ``Store`` is all of them on one ``transaction()``. ``SQLiteStore`` is the
embedded default, ``PostgresStore`` the store of several nodes and ``MemoryStore`` the test
double; all three implement exactly this protocol, and one contract suite runs against each.

The protocol is synchronous, and each method is one short statement or a few inside one
transaction, by the database's own means:

* ``begin_receipt`` is an insert-if-absent on a unique key (``ON CONFLICT DO NOTHING``), and
  ``release_receipt`` a delete guarded by ``status = 'pending'``;
* ``due_outbox`` is a bounded, ordered select (``FOR UPDATE SKIP LOCKED`` on PostgreSQL), and
  ``next_outbox_attempt`` one ``MIN`` over the same index;
* ``lock_ledger`` reads a budget ledger with its row locked (``FOR UPDATE``) until the charge
  that reads it commits;
* ``claim_lease`` is one upsert that takes a free or expired lease and raises its generation,
  and ``fence`` refuses a write of a holder whose generation moved on;
* ``transaction()`` groups calls atomically, e.g. completing a receipt and enqueuing its
  deliveries together.

Why synchronous, and how a network round trip stays off the event loop: docs/architecture.md
("The store protocol").

Values cross the boundary as JSON: mappings given to the store must be JSON-serialisable,
and what comes back is a fresh decoded copy (tuples come back as lists).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, TypedDict, Unpack

from membrane.json_types import JSONDict, JSONObject

__all__ = [
    "BudgetStore",
    "DeadLetter",
    "EdgeStatus",
    "Inspectable",
    "Lease",
    "LeaseStore",
    "LineageEdge",
    "LineageStore",
    "NewEdge",
    "OutboxItem",
    "OutboxStore",
    "PruneReport",
    "Receipt",
    "ReceiptStatus",
    "ReceiptStore",
    "RunStore",
    "ScheduleStore",
    "SessionHeader",
    "Store",
    "StoredEvent",
    "Transactional",
    "TranscriptStore",
    "WorkflowRecord",
    "WorkflowStore",
    "brief_digest",
]

#: The header ``meta`` key of a run's own budget ledger (``BudgetStore``).
BUDGET_KEY: Final = "budget"

ReceiptStatus = Literal["pending", "completed"]
EdgeStatus = Literal["running", "completed", "failed", "interrupted"]
EDGE_END_STATES: frozenset[str] = frozenset({"completed", "failed", "interrupted"})


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """The durable identity of one agent session.

    ``delegation_depth`` is 0 for a top-level agent and the parent's depth + 1 for a child;
    a store refuses to write, and refuses to return, anything but a non-negative safe integer.
    ``result`` is the last result given to ``set_status`` (``None`` until then).
    """

    session_id: str
    agent: str
    parent_id: str | None
    delegation_depth: int
    status: str
    provider: str = "in-process"
    created_at: float = 0.0
    request_id: str | None = None
    meta: JSONObject = field(default_factory=dict)
    result: JSONObject | None = None


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One lifecycle event. ``seq`` rises strictly across the whole store and is never reused."""

    seq: int
    session_id: str
    kind: str
    data: JSONObject
    at: float


@dataclass(frozen=True, slots=True)
class Receipt:
    """An idempotency receipt: written ``pending`` before acting, ``completed`` with the result."""

    request_id: str
    kind: str
    status: ReceiptStatus
    result: JSONObject | None
    created_at: float
    completed_at: float | None = None
    #: Who wrote it (``durable.owners.new_owner()``: host, pid, boot and start of the process),
    #: so that a successor can tell a dead owner's pending receipt from a live one's.
    owner: str | None = None


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """A delivery owed to ``recipient`` (a session id); drained with bounded backoff."""

    id: int
    recipient: str
    payload: JSONObject
    attempts: int
    next_attempt_at: float
    created_at: float
    delivered_at: float | None = None


@dataclass(frozen=True, slots=True)
class LineageEdge:
    """Who spawned whom, for what, and what came back.

    ``brief_digest`` is the SHA-256 of the dispatched brief (see ``brief_digest()``);
    ``spawn_fingerprint`` records provider, model, thinking and similar routing facts.
    """

    parent_id: str
    child_id: str
    child_role: str
    brief_digest: str
    spawn_fingerprint: JSONObject
    status: EdgeStatus
    created_at: float
    result_summary: str | None = None
    completed_at: float | None = None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An outbox item the drainer gave up on after its last attempt: kept, never dropped,
    with the reason of that attempt (``last_error``); ``revive_outbox`` queues it again."""

    id: int
    recipient: str
    payload: JSONObject
    attempts: int
    created_at: float
    last_error: str
    dead_at: float


@dataclass(frozen=True, slots=True)
class Lease:
    """Which process drives a run (``owner``), until when (``expires_at``) unless renewed."""

    run_id: str
    owner: str
    expires_at: float
    acquired_at: float
    #: Rises each time another owner takes the lease (``LeaseStore.fence``).
    generation: int = 1


@dataclass(frozen=True, slots=True)
class WorkflowRecord:
    """The durable state of one run's gated workflow; ``version`` rises with every write."""

    run_id: str
    workflow: str
    state: JSONObject
    version: int
    updated_at: float


class NewEdge(TypedDict):
    """The fields ``Store.record_edge`` takes (as keywords): a lineage edge before it is
    stored, without its status (``running``) and the times the store stamps."""

    parent_id: str
    child_id: str
    child_role: str
    brief_digest: str
    spawn_fingerprint: JSONObject


def brief_digest(brief: str) -> str:
    """The lineage ledger's digest of a brief: hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(brief.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What one ``SQLiteStore.prune`` deleted: rows of each kind, and the bytes the file gave
    back to the file system."""

    sessions: int = 0
    events: int = 0
    messages: int = 0
    outbox: int = 0
    dead_letters: int = 0
    receipts: int = 0
    lineage_edges: int = 0
    freed_bytes: int = 0

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


class Transactional(Protocol):
    """What every concern shares: one transaction spanning calls of any concern, the
    durability barrier, and closing."""

    #: Whether a call is a network round trip (PostgreSQL) rather than a local file's
    #: microseconds: the runtime then makes a run's per-turn writes in a worker thread, never
    #: on the event loop (docs/architecture.md, "The store protocol").
    remote: bool

    def transaction(self) -> AbstractContextManager[None]:
        """Group calls atomically. Nested blocks are savepoints: an inner failure that the
        caller catches rolls back only the inner block. Never hold one across an ``await``."""
        ...

    async def barrier(self) -> None:
        """Return once every transaction committed before the call is as durable as the
        store's mode promises. The places that acknowledge to the outside (a start's run id,
        a completed receipt, a written message, a turn's end before the next model request,
        a run's result) await it; a store whose commits are durable when they return (or
        that promises no more than surviving the process) returns at once."""
        ...

    def close(self) -> None: ...


class RunStore(Protocol):
    """Runs: session headers (with the durable ``delegation_depth``) and lifecycle events."""

    def create_session(self, header: SessionHeader) -> None: ...

    def get_header(self, session_id: str) -> SessionHeader | None: ...

    def set_status(self, session_id: str, status: str, *, result: JSONObject | None = None) -> None:
        """Set the status; ``result``, when given, replaces the stored result."""
        ...

    def list_sessions(self, *, parent_id: str | None = None) -> list[SessionHeader]:
        """All sessions (``parent_id=None``) or one parent's children, oldest first."""
        ...

    def page_sessions(
        self,
        *,
        limit: int,
        after: str | None = None,
        parent_id: str | None = None,
        meta: tuple[str, str] | None = None,
    ) -> list[SessionHeader]:
        """Up to ``limit`` sessions in the order the store created them, from just after
        session ``after`` (from the first when ``None``; ``StoreError`` when no session
        ``after`` is stored); ``parent_id``: only its children; ``meta``: only sessions whose
        ``meta`` holds ``key: value``."""
        ...

    def update_meta(self, session_id: str, values: JSONObject) -> None:
        """Merge ``values`` into the header's ``meta``: each top-level key replaces its old
        value; keys not named keep theirs."""
        ...

    def append_event(self, session_id: str, kind: str, data: JSONObject) -> int:
        """Append one event and return its ``seq``."""
        ...

    def events(self, *, session_id: str | None = None, after: int = 0) -> list[StoredEvent]:
        """Events with ``seq > after``, in ``seq`` order, optionally for one session."""
        ...


class LeaseStore(Protocol):
    """Run leases: which process drives a run, until when, and under which generation.

    A lease's ``generation`` rises every time another owner takes it, so a write that names
    the generation it was made under (``fence``) is refused once the run moved on."""

    def claim_lease(self, run_id: str, *, owner: str, ttl: float) -> Lease:
        """Take the lease of ``run_id`` for ``ttl`` seconds when it is free, expired or already
        ``owner``'s; return the lease in force afterwards (another owner's when it is live)."""
        ...

    def release_lease(self, run_id: str, *, owner: str) -> None:
        """Drop ``owner``'s lease of ``run_id`` (a no-op when another owner holds it)."""
        ...

    def end_lease(self, run_id: str, *, owner: str, generation: int) -> None:
        """Drop ``owner``'s lease of ``run_id`` taken at ``generation``, the last write of a
        run's end; ``RunLeased`` when the lease is no longer so held (another owner took the
        run over), so the enclosing transaction's writes are refused with it. One statement."""
        ...

    def fence(self, run_id: str, *, owner: str, generation: int) -> None:
        """Refuse (``RunLeased``, naming the holder) unless ``owner`` still holds the lease
        of ``run_id`` at ``generation``. Inside a transaction the lease row stays locked until
        it ends, so no takeover can slip between the check and the writes it guards."""
        ...

    def renew_owner_leases(self, owner: str, *, ttl: float) -> list[str]:
        """Extend every lease ``owner`` holds (one statement); return their run ids, sorted."""
        ...

    def lease_owners(self) -> list[str]:
        """The owners holding leases, sorted."""
        ...

    def expire_owner_leases(self, owner: str) -> list[str]:
        """Mark every lease ``owner`` holds expired (``expires_at`` 0: its process is dead), so
        a sweep reconciles those runs and a claim takes them; return their run ids, sorted."""
        ...

    def release_owner_leases(self, owner: str) -> None:
        """Drop every lease ``owner`` holds (a runtime that closes)."""
        ...

    def expired_leases(self, *, now: float | None = None, limit: int = 100) -> list[Lease]:
        """Leases whose ``expires_at`` is before ``now``, oldest expiry first."""
        ...


class TranscriptStore(Protocol):
    """Each run's conversation, so that a resume continues it."""

    def append_messages(
        self, session_id: str, messages: Sequence[JSONObject], *, start: int
    ) -> int:
        """Store ``messages`` at positions ``start``, ``start + 1``... of the session's
        transcript; return its new length.

        A transcript only grows: ``start`` must be its current length, so a gap or an
        overwrite (a second writer, a stale caller) is a ``StoreError`` and nothing is written.
        """
        ...

    def transcript(self, session_id: str) -> list[JSONDict]:
        """The session's messages in order (empty when none are stored yet)."""
        ...

    def transcript_length(self, session_id: str) -> int:
        """How many messages the session's transcript holds."""
        ...


class ReceiptStore(Protocol):
    """Idempotency receipts, one per ``request_id`` (a unique key)."""

    def begin_receipt(
        self, request_id: str, *, kind: str, owner: str | None = None
    ) -> Receipt | None:
        """Write a pending receipt (held by ``owner``) unless one exists.

        ``None`` means this call wrote it and owns the action. Otherwise the existing receipt
        is returned: ``completed`` carries the result to replay; ``pending`` is in flight (or
        stale, see ``reap_pending_receipts``).
        """
        ...

    def complete_receipt(self, request_id: str, result: JSONObject) -> Receipt:
        """Complete a pending receipt. Completing it again with any result is an error."""
        ...

    def release_receipt(self, request_id: str, *, owner: str | None = None) -> None:
        """Delete a pending receipt, so that the next ``begin_receipt`` of ``request_id`` owns
        the action again: its owner did not act and its failure is worth retrying. Releasing
        a receipt that does not exist is a no-op (a release is idempotent, and a reap may have
        come first); releasing a completed one is a ``StoreError`` and deletes nothing. With
        ``owner``, only a pending receipt that ``owner`` holds is deleted (a successor clearing
        a dead owner's receipt never deletes the one a live process wrote since)."""
        ...

    def reap_pending_receipts(
        self, *, older_than: float, owners: Collection[str] = (), spare: Collection[str] = ()
    ) -> list[str]:
        """Delete pending receipts created before ``older_than`` (except those held by one of
        ``spare``) and those held by one of ``owners``; return their request ids."""
        ...

    def pending_receipt_owners(self) -> list[str]:
        """The owners of pending receipts, sorted (a receipt with no owner is left out)."""
        ...


class OutboxStore(Protocol):
    """Deliveries owed to runs, their attempts, and the dead letters."""

    def enqueue_outbox(
        self, recipient: str, payload: JSONObject, *, not_before: float | None = None
    ) -> int:
        """Queue a delivery, due at ``not_before`` (default: now). Returns its id."""
        ...

    def due_outbox(self, *, now: float | None = None, limit: int = 100) -> list[OutboxItem]:
        """Undelivered items due at ``now`` (default: the clock), oldest first. A store
        shared by several processes skips the items another drainer holds locked (``FOR
        UPDATE SKIP LOCKED``) and keeps the ones it returns locked until its transaction
        ends."""
        ...

    def pending_outbox(self, *, recipient: str | None = None, limit: int = 100) -> list[OutboxItem]:
        """Undelivered items (``recipient``'s, or all), oldest first, whenever they are due."""
        ...

    def next_outbox_attempt(self) -> float | None:
        """The earliest ``next_attempt_at`` of an undelivered item; ``None`` when none is."""
        ...

    def mark_attempt(self, item_id: int, *, next_attempt_at: float) -> OutboxItem:
        """Record a delivery attempt that did not deliver, and when to try again."""
        ...

    def mark_delivered(self, item_id: int) -> None: ...

    def postpone_outbox(self, item_id: int, *, next_attempt_at: float) -> None:
        """Move an undelivered item's due time without counting an attempt (its notice is
        waiting in a live recipient); a delivered or missing item is a no-op."""
        ...

    def note_outbox_error(self, item_id: int, error: str) -> None:
        """Keep why the last attempt of an undelivered item failed."""
        ...

    def outbox_error(self, item_id: int) -> str | None:
        """The last attempt's error of an undelivered item, if it failed."""
        ...

    def bury_outbox(self, item_id: int, *, error: str) -> DeadLetter:
        """Move an undelivered item to the dead letters (it is no longer due or pending)."""
        ...

    def dead_outbox(self, *, recipient: str | None = None, limit: int = 100) -> list[DeadLetter]:
        """Dead letters (``recipient``'s, or all), oldest first."""
        ...

    def revive_outbox(self, item_id: int) -> OutboxItem:
        """Queue a dead letter again under its id, due now, with no attempts counted."""
        ...


class LineageStore(Protocol):
    """The lineage ledger: one edge per delegation."""

    def record_edge(self, **edge: Unpack[NewEdge]) -> LineageEdge:
        """Record a ``running`` edge; ``child_id`` must be a stored session."""
        ...

    def complete_edge(
        self, child_id: str, *, status: EdgeStatus, result_summary: str | None = None
    ) -> LineageEdge:
        """Move a running edge to ``completed`` or ``failed``."""
        ...

    def reopen_edge(self, child_id: str) -> LineageEdge:
        """Move an ``interrupted`` edge back to ``running`` (its run was resumed)."""
        ...

    def edges(self, *, parent_id: str | None = None) -> list[LineageEdge]:
        """All edges or one parent's, oldest first."""
        ...


class BudgetStore(Protocol):
    """Budget ledgers: a run's ledger is ``meta["budget"]`` of its header, charged in one
    transaction that holds the ledger's row locked from its read to its write."""

    def lock_ledger(self, owner: str) -> JSONDict | None:
        """``owner``'s stored ledger (``None`` when it has none, or no header), its row locked
        until the enclosing transaction ends (``SELECT ... FOR UPDATE``; SQLite's write
        transaction excludes every other writer already), so that two charges of one ledger
        never both read the same ``used``."""
        ...

    def write_ledger(self, owner: str, ledger: JSONObject) -> None:
        """Replace ``owner``'s ledger (``meta["budget"]``); no-op when no header is stored."""
        ...


class ScheduleStore(Protocol):
    """Schedules: one JSON record per schedule (``membrane.durable.schedules`` owns the shape)."""

    def put_schedule(self, schedule_id: str, record: JSONObject) -> None:
        """Create or replace schedule ``schedule_id``."""
        ...

    def get_schedule(self, schedule_id: str) -> JSONDict | None: ...

    def list_schedules(self) -> list[JSONDict]:
        """Every schedule, by id."""
        ...

    def delete_schedule(self, schedule_id: str) -> bool:
        """Remove it; ``False`` when there was none."""
        ...


class WorkflowStore(Protocol):
    """Each run's gated workflow state, written at the version read (optimistic)."""

    def get_workflow(self, run_id: str) -> WorkflowRecord | None: ...

    def put_workflow(
        self, run_id: str, *, workflow: str, state: JSONObject, expected_version: int
    ) -> WorkflowRecord:
        """Write a run's workflow state when its stored version is ``expected_version`` (0: no
        state yet); another version is a ``StoreError`` and nothing is written."""
        ...


class Store(
    Transactional,
    RunStore,
    LeaseStore,
    TranscriptStore,
    ReceiptStore,
    OutboxStore,
    LineageStore,
    BudgetStore,
    ScheduleStore,
    WorkflowStore,
    Protocol,
):
    """Durable state, every concern on one transaction (``SQLiteStore``, ``PostgresStore``,
    ``MemoryStore``). A component that needs one concern takes that protocol.

    Errors: every failure is a ``StoreError`` (``store-error``), except a malformed depth,
    which is ``InvalidDepth`` (``invalid-depth``) whether it is being written or was read back,
    and a fenced write, which is ``RunLeased``. Methods that name a session which does not
    exist raise ``StoreError``, except ``get_header`` (returns ``None``).
    """


class Inspectable(Protocol):
    """Reads that only tests and diagnostics make (``membrane.testing.stored_receipt`` and
    ``stored_lease``): every store has them, the runtime never calls them."""

    def get_receipt(self, request_id: str) -> Receipt | None: ...

    def get_lease(self, run_id: str) -> Lease | None: ...
