"""The ``MemoryStore`` side of dead letters, run leases, workflow state and reopened lineage
edges, with the same semantics as ``membrane.store.sqlite_durable`` (the contract tests run
against both).

``MemoryDurable`` is a mixin over ``MemoryStore``'s plumbing, typed by the ``Opened`` protocol
(``_open`` yields the state under the lock, ``_put``/``_drop`` change a table through the
transaction's undo log, ``_clock``); its containers live in ``DurableState``, inside the
store's state, so a failed ``transaction()`` rolls them back too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

from membrane.errors import StoreError
from membrane.json_types import JSONObject
from membrane.store.base import (
    DeadLetter,
    Lease,
    LineageEdge,
    OutboxItem,
    WorkflowRecord,
)
from membrane.store.rows import (
    dump_json,
    lease_moved,
    missing,
    stale_workflow,
)

__all__ = ["DurableState", "MemoryDurable", "Opened"]


@dataclass(slots=True)
class DurableState:
    dead: dict[int, DeadLetter] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    #: ``Lease``'s fields in order: a tuple of atomic values, which the garbage collector stops
    #: tracking at its first pass (a live run's lease adds nothing to its full passes).
    leases: dict[str, tuple[str, str, float, float, int]] = field(default_factory=dict)
    workflows: dict[str, WorkflowRecord] = field(default_factory=dict)


#: Where a stored lease holds its owner, its expiry and when it was taken.
_OWNER: Final = 1
_EXPIRES: Final = 2
_ACQUIRED: Final = 3
_GENERATION: Final = 4


class _Core(Protocol):
    """What the mixin reads of ``MemoryStore``'s state."""

    durable: DurableState
    sessions: dict[str, Any]
    outbox: dict[int, OutboxItem]
    edges: dict[str, LineageEdge]


class Opened(Protocol):
    """What the mixin uses of ``MemoryStore``: its clock, ``_open`` (the state under the lock)
    and ``_put``/``_drop`` (a change through the transaction's undo log)."""

    _clock: Callable[[], float]

    def _open(self: Opened, action: str) -> AbstractContextManager[_Core]: ...

    def _put(self: Opened, table: dict[Any, Any], key: object, value: object) -> None: ...

    def _drop(self: Opened, table: dict[Any, Any], key: object) -> Any: ...


class MemoryDurable:
    """Dead letters, leases and workflow state in memory."""

    # -- the outbox's attempts and dead letters -------------------------------------------------

    def postpone_outbox(self: Opened, item_id: int, *, next_attempt_at: float) -> None:
        with self._open("postpone_outbox") as state:
            item = state.outbox.get(item_id)
            if item is not None and item.delivered_at is None:
                self._put(state.outbox, item_id, replace(item, next_attempt_at=next_attempt_at))

    def note_outbox_error(self: Opened, item_id: int, error: str) -> None:
        with self._open("note_outbox_error") as state:
            item = state.outbox.get(item_id)
            if item is not None and item.delivered_at is None:
                self._put(state.durable.errors, item_id, str(error))

    def outbox_error(self: Opened, item_id: int) -> str | None:
        with self._open("outbox_error") as state:
            found: str | None = state.durable.errors.get(item_id)
            return found

    def bury_outbox(self: Opened, item_id: int, *, error: str) -> DeadLetter:
        with self._open("bury_outbox") as state:
            item = state.outbox.get(item_id)
            if item is None or item.delivered_at is not None:
                raise missing("undelivered outbox item", item_id)
            dead = DeadLetter(
                id=item.id,
                recipient=item.recipient,
                payload=item.payload,
                attempts=item.attempts,
                created_at=item.created_at,
                last_error=str(error),
                dead_at=self._clock(),
            )
            self._drop(state.outbox, item_id)
            self._drop(state.durable.errors, item_id)
            self._put(state.durable.dead, item_id, dead)
            return copy.deepcopy(dead)

    def dead_outbox(
        self: Opened, *, recipient: str | None = None, limit: int = 100
    ) -> list[DeadLetter]:
        if limit < 1:
            raise StoreError(f"dead_outbox limit must be at least 1, got {limit}", limit=limit)
        with self._open("dead_outbox") as state:
            found = [d for d in state.durable.dead.values() if recipient in (None, d.recipient)]
        return copy.deepcopy(sorted(found, key=lambda d: d.id)[:limit])

    def revive_outbox(self: Opened, item_id: int) -> OutboxItem:
        with self._open("revive_outbox") as state:
            dead = state.durable.dead.get(item_id)
            if dead is None:
                raise missing("dead letter", item_id)
            now = self._clock()
            item = OutboxItem(dead.id, dead.recipient, dead.payload, 0, now, dead.created_at)
            self._drop(state.durable.dead, item_id)
            self._put(state.durable.errors, item_id, dead.last_error)
            self._put(state.outbox, item_id, item)
            return copy.deepcopy(item)

    # -- run leases -----------------------------------------------------------------------------

    def claim_lease(self: Opened, run_id: str, *, owner: str, ttl: float) -> Lease:
        with self._open("claim_lease") as state:
            now = self._clock()
            held = state.durable.leases.get(run_id)
            if held is None:
                held = (run_id, owner, now + ttl, now, 1)
            elif held[_OWNER] == owner:
                held = (run_id, owner, now + ttl, held[_ACQUIRED], held[_GENERATION])
            elif held[_EXPIRES] <= now:
                held = (run_id, owner, now + ttl, now, held[_GENERATION] + 1)
            self._put(state.durable.leases, run_id, held)
            return Lease(*held)

    def end_lease(self: Opened, run_id: str, *, owner: str, generation: int) -> None:
        with self._open("end_lease") as state:
            held = state.durable.leases.get(run_id)
            if held is None or held[_OWNER] != owner or held[_GENERATION] != generation:
                raise lease_moved(run_id, None if held is None else Lease(*held), owner=owner)
            self._drop(state.durable.leases, run_id)

    def fence(self: Opened, run_id: str, *, owner: str, generation: int) -> None:
        with self._open("fence") as state:
            held = state.durable.leases.get(run_id)
        if held is None or held[_OWNER] != owner or held[_GENERATION] != generation:
            raise lease_moved(run_id, None if held is None else Lease(*held), owner=owner)

    def release_lease(self: Opened, run_id: str, *, owner: str) -> None:
        with self._open("release_lease") as state:
            held = state.durable.leases.get(run_id)
            if held is not None and held[_OWNER] == owner:
                self._drop(state.durable.leases, run_id)

    def get_lease(self: Opened, run_id: str) -> Lease | None:
        with self._open("get_lease") as state:
            held = state.durable.leases.get(run_id)
        return None if held is None else Lease(*held)

    def renew_owner_leases(self: Opened, owner: str, *, ttl: float) -> list[str]:
        with self._open("renew_owner_leases") as state:
            until = self._clock() + ttl
            leases = state.durable.leases
            held = [lease for lease in leases.values() if lease[_OWNER] == owner]
            for run_id, _, _, acquired, generation in held:
                self._put(leases, run_id, (run_id, owner, until, acquired, generation))
            return sorted(lease[0] for lease in held)

    def release_owner_leases(self: Opened, owner: str) -> None:
        with self._open("release_owner_leases") as state:
            leases = state.durable.leases
            for run_id in [r for r, lease in leases.items() if lease[_OWNER] == owner]:
                self._drop(leases, run_id)

    def lease_owners(self: Opened) -> list[str]:
        with self._open("lease_owners") as state:
            return sorted({lease[_OWNER] for lease in state.durable.leases.values()})

    def expire_owner_leases(self: Opened, owner: str) -> list[str]:
        with self._open("expire_owner_leases") as state:
            held = [lease for lease in state.durable.leases.values() if lease[_OWNER] == owner]
            for run_id, _, _, acquired, generation in held:
                self._put(state.durable.leases, run_id, (run_id, owner, 0.0, acquired, generation))
            return sorted(lease[0] for lease in held)

    def expired_leases(self: Opened, *, now: float | None = None, limit: int = 100) -> list[Lease]:
        with self._open("expired_leases") as state:
            moment = self._clock() if now is None else now
            found = [lease for lease in state.durable.leases.values() if lease[_EXPIRES] <= moment]
        found.sort(key=lambda lease: (lease[_EXPIRES], lease[0]))
        return [Lease(*lease) for lease in found[:limit]]

    # -- workflow state -------------------------------------------------------------------------

    def get_workflow(self: Opened, run_id: str) -> WorkflowRecord | None:
        with self._open("get_workflow") as state:
            found: WorkflowRecord | None = copy.deepcopy(state.durable.workflows.get(run_id))
            return found

    def put_workflow(
        self: Opened, run_id: str, *, workflow: str, state: JSONObject, expected_version: int
    ) -> WorkflowRecord:
        encoded: dict[str, Any] = json.loads(
            dump_json(state, what=f"workflow state of {run_id!r}") or "{}"
        )
        with self._open("put_workflow") as core:
            held = core.durable.workflows.get(run_id)
            current = 0 if held is None else held.version
            if current != expected_version:
                raise stale_workflow(run_id, current=current, expected=expected_version)
            if run_id not in core.sessions:
                raise missing("session", run_id)
            record = WorkflowRecord(run_id, workflow, encoded, current + 1, self._clock())
            self._put(core.durable.workflows, run_id, record)
            return copy.deepcopy(record)

    # -- lineage --------------------------------------------------------------------------------

    def reopen_edge(self: Opened, child_id: str) -> LineageEdge:
        with self._open("reopen_edge") as state:
            edge = state.edges.get(child_id)
            if edge is None or edge.status != "interrupted":
                raise StoreError(
                    f"the lineage edge of {child_id!r} is not interrupted, so it cannot reopen",
                    child_id=child_id,
                )
            edge = replace(edge, status="running", completed_at=None)
            self._put(state.edges, child_id, edge)
            return copy.deepcopy(edge)
