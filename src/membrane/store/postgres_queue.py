"""The ``PostgresStore`` statements of the outbox and its dead letters, run leases (with their
generations and ``fence``), workflow state, schedules and reopened lineage edges.

A mixin on ``PostgresStore``'s plumbing (``_use`` gives a cursor inside the calling thread's
transaction, or on a borrowed connection; ``_clock`` stamps rows), as ``sqlite_outbox`` and
``sqlite_durable`` are on ``SQLiteStore``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from membrane.errors import StoreError
from membrane.json_types import JSONDict, JSONObject
from membrane.store.base import (
    DeadLetter,
    Lease,
    LineageEdge,
    OutboxItem,
    WorkflowRecord,
)
from membrane.store.rows import (
    decoded,
    dump_json,
    lease_moved,
    load_json,
    missing,
    stale_workflow,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresQueue", "edge_row"]

_OUTBOX_COLUMNS = "id, recipient, payload, attempts, next_attempt_at, created_at, delivered_at"
_DEAD_COLUMNS = "id, recipient, payload, attempts, created_at, last_error, dead_at"
_LEASE_COLUMNS = "run_id, owner, expires_at, acquired_at, generation"
_EDGE_COLUMNS = (
    "parent_id, child_id, child_role, brief_digest, spawn_fingerprint, status, created_at, "
    "result_summary, completed_at"
)


class Pooled(Protocol):
    """What the mixin uses of ``PostgresStore``: its clock and ``_use``."""

    _clock: Callable[[], float]

    def _use(
        self, action: str, *, block: bool = False
    ) -> AbstractContextManager[psycopg.Cursor[Any]]: ...


class PostgresQueue:
    """Outbox, leases, workflow state, schedules and reopened edges on PostgreSQL."""

    # -- outbox ---------------------------------------------------------------------------------

    def enqueue_outbox(
        self: Pooled, recipient: str, payload: JSONObject, *, not_before: float | None = None
    ) -> int:
        encoded = dump_json(payload, what=f"outbox payload for {recipient!r}")
        now = self._clock()
        with self._use("enqueue_outbox") as cur:
            row = cur.execute(
                "INSERT INTO outbox (recipient, payload, next_attempt_at, created_at) "
                "VALUES (%s, %s, %s, %s) RETURNING id",
                (recipient, encoded, now if not_before is None else not_before, now),
            ).fetchone()
        assert row is not None
        return int(row[0])

    def due_outbox(self: Pooled, *, now: float | None = None, limit: int = 100) -> list[OutboxItem]:
        if limit < 1:
            raise StoreError(f"due_outbox limit must be at least 1, got {limit}", limit=limit)
        with self._use("due_outbox") as cur:
            # Items another drainer holds (inside its transaction) are skipped, not waited for.
            rows = cur.execute(
                f"SELECT {_OUTBOX_COLUMNS} FROM outbox "
                "WHERE delivered_at IS NULL AND next_attempt_at <= %s ORDER BY id LIMIT %s "
                "FOR UPDATE SKIP LOCKED",
                (self._clock() if now is None else now, limit),
            ).fetchall()
        return [_outbox(row) for row in rows]

    def pending_outbox(
        self: Pooled, *, recipient: str | None = None, limit: int = 100
    ) -> list[OutboxItem]:
        query = f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE delivered_at IS NULL AND"
        rows = _listed(self, "pending_outbox", query, recipient=recipient, limit=limit)
        return [_outbox(row) for row in rows]

    def next_outbox_attempt(self: Pooled) -> float | None:
        with self._use("next_outbox_attempt") as cur:
            row = cur.execute(
                "SELECT MIN(next_attempt_at) FROM outbox WHERE delivered_at IS NULL"
            ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def mark_attempt(self: Pooled, item_id: int, *, next_attempt_at: float) -> OutboxItem:
        with self._use("mark_attempt") as cur:
            row = cur.execute(
                "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = %s "
                f"WHERE id = %s AND delivered_at IS NULL RETURNING {_OUTBOX_COLUMNS}",
                (next_attempt_at, item_id),
            ).fetchone()
            if row is not None:
                return _outbox(row)
            _check_outbox_exists(cur, item_id)
        raise StoreError(f"outbox item {item_id} is already delivered", item_id=item_id)

    def mark_delivered(self: Pooled, item_id: int) -> None:
        with self._use("mark_delivered") as cur:
            cur.execute(
                "UPDATE outbox SET delivered_at = %s WHERE id = %s AND delivered_at IS NULL",
                (self._clock(), item_id),
            )
            if cur.rowcount == 0:
                _check_outbox_exists(cur, item_id)

    def postpone_outbox(self: Pooled, item_id: int, *, next_attempt_at: float) -> None:
        with self._use("postpone_outbox") as cur:
            cur.execute(
                "UPDATE outbox SET next_attempt_at = %s WHERE id = %s AND delivered_at IS NULL",
                (next_attempt_at, item_id),
            )

    def note_outbox_error(self: Pooled, item_id: int, error: str) -> None:
        with self._use("note_outbox_error") as cur:
            cur.execute(
                "UPDATE outbox SET last_error = %s WHERE id = %s AND delivered_at IS NULL",
                (str(error), item_id),
            )

    def outbox_error(self: Pooled, item_id: int) -> str | None:
        with self._use("outbox_error") as cur:
            row = cur.execute("SELECT last_error FROM outbox WHERE id = %s", (item_id,)).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def bury_outbox(self: Pooled, item_id: int, *, error: str) -> DeadLetter:
        with self._use("bury_outbox") as cur:
            # One statement: the item leaves the queue and becomes a dead letter under its id.
            row = cur.execute(
                "WITH gone AS (DELETE FROM outbox WHERE id = %s AND delivered_at IS NULL "
                "RETURNING id, recipient, payload, attempts, created_at) "
                f"INSERT INTO outbox_dead ({_DEAD_COLUMNS}) "
                "SELECT id, recipient, payload, attempts, created_at, %s, %s FROM gone "
                f"RETURNING {_DEAD_COLUMNS}",
                (item_id, str(error), self._clock()),
            ).fetchone()
        if row is None:
            raise missing("undelivered outbox item", item_id)
        return _dead(row)

    def dead_outbox(
        self: Pooled, *, recipient: str | None = None, limit: int = 100
    ) -> list[DeadLetter]:
        query = f"SELECT {_DEAD_COLUMNS} FROM outbox_dead WHERE"
        rows = _listed(self, "dead_outbox", query, recipient=recipient, limit=limit)
        return [_dead(row) for row in rows]

    def revive_outbox(self: Pooled, item_id: int) -> OutboxItem:
        now = self._clock()
        with self._use("revive_outbox") as cur:
            row = cur.execute(
                "WITH back AS (DELETE FROM outbox_dead WHERE id = %s "
                "RETURNING id, recipient, payload, created_at, last_error) "
                "INSERT INTO outbox (id, recipient, payload, attempts, next_attempt_at, "
                "created_at, last_error) SELECT id, recipient, payload, 0, %s, created_at, "
                f"last_error FROM back RETURNING {_OUTBOX_COLUMNS}",
                (item_id, now),
            ).fetchone()
        if row is None:
            raise missing("dead letter", item_id)
        return _outbox(row)

    # -- run leases -----------------------------------------------------------------------------

    def claim_lease(self: Pooled, run_id: str, *, owner: str, ttl: float) -> Lease:
        now = self._clock()
        with self._use("claim_lease") as cur:
            row = cur.execute(
                f"INSERT INTO run_leases ({_LEASE_COLUMNS}) VALUES (%s, %s, %s, %s, 1) "
                "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, "
                "expires_at = excluded.expires_at, acquired_at = CASE WHEN "
                "run_leases.owner = excluded.owner THEN run_leases.acquired_at "
                "ELSE excluded.acquired_at END, generation = CASE WHEN "
                "run_leases.owner = excluded.owner THEN run_leases.generation "
                "ELSE run_leases.generation + 1 END "
                "WHERE run_leases.owner = excluded.owner OR run_leases.expires_at <= %s "
                f"RETURNING {_LEASE_COLUMNS}",
                (run_id, owner, now + ttl, now, now),
            ).fetchone()
            if row is None:
                row = cur.execute(
                    f"SELECT {_LEASE_COLUMNS} FROM run_leases WHERE run_id = %s", (run_id,)
                ).fetchone()
        if row is None:  # released between the conflict and the read: claim it again
            return PostgresQueue.claim_lease(self, run_id, owner=owner, ttl=ttl)
        return _lease(row)

    def end_lease(self: Pooled, run_id: str, *, owner: str, generation: int) -> None:
        with self._use("end_lease") as cur:
            cur.execute(
                "DELETE FROM run_leases WHERE run_id = %s AND owner = %s AND generation = %s",
                (run_id, owner, generation),
            )
            if cur.rowcount == 1:
                return
            row = cur.execute(
                f"SELECT {_LEASE_COLUMNS} FROM run_leases WHERE run_id = %s", (run_id,)
            ).fetchone()
        raise lease_moved(run_id, None if row is None else _lease(row), owner=owner)

    def fence(self: Pooled, run_id: str, *, owner: str, generation: int) -> None:
        with self._use("fence") as cur:
            # FOR SHARE: a takeover's UPDATE of this row waits for the guarded writes to commit.
            row = cur.execute(
                f"SELECT {_LEASE_COLUMNS} FROM run_leases WHERE run_id = %s FOR SHARE", (run_id,)
            ).fetchone()
        held = None if row is None else _lease(row)
        if held is None or held.owner != owner or held.generation != generation:
            raise lease_moved(run_id, held, owner=owner)

    def release_lease(self: Pooled, run_id: str, *, owner: str) -> None:
        with self._use("release_lease") as cur:
            cur.execute("DELETE FROM run_leases WHERE run_id = %s AND owner = %s", (run_id, owner))

    def get_lease(self: Pooled, run_id: str) -> Lease | None:
        with self._use("get_lease") as cur:
            row = cur.execute(
                f"SELECT {_LEASE_COLUMNS} FROM run_leases WHERE run_id = %s", (run_id,)
            ).fetchone()
        return None if row is None else _lease(row)

    def renew_owner_leases(self: Pooled, owner: str, *, ttl: float) -> list[str]:
        with self._use("renew_owner_leases") as cur:
            rows = cur.execute(
                "UPDATE run_leases SET expires_at = %s WHERE owner = %s RETURNING run_id",
                (self._clock() + ttl, owner),
            ).fetchall()
        return sorted(str(row[0]) for row in rows)

    def lease_owners(self: Pooled) -> list[str]:
        with self._use("lease_owners") as cur:
            rows = cur.execute("SELECT DISTINCT owner FROM run_leases ORDER BY owner").fetchall()
        return [str(row[0]) for row in rows]

    def expire_owner_leases(self: Pooled, owner: str) -> list[str]:
        with self._use("expire_owner_leases") as cur:
            rows = cur.execute(
                "UPDATE run_leases SET expires_at = 0 WHERE owner = %s RETURNING run_id", (owner,)
            ).fetchall()
        return sorted(str(row[0]) for row in rows)

    def release_owner_leases(self: Pooled, owner: str) -> None:
        with self._use("release_owner_leases") as cur:
            cur.execute("DELETE FROM run_leases WHERE owner = %s", (owner,))

    def expired_leases(self: Pooled, *, now: float | None = None, limit: int = 100) -> list[Lease]:
        moment = self._clock() if now is None else now
        with self._use("expired_leases") as cur:
            rows = cur.execute(
                f"SELECT {_LEASE_COLUMNS} FROM run_leases WHERE expires_at <= %s "
                "ORDER BY expires_at, run_id LIMIT %s",
                (moment, limit),
            ).fetchall()
        return [_lease(row) for row in rows]

    # -- workflow state -------------------------------------------------------------------------

    def get_workflow(self: Pooled, run_id: str) -> WorkflowRecord | None:
        with self._use("get_workflow") as cur:
            row = cur.execute(
                "SELECT run_id, workflow, state, version, updated_at FROM workflow_state "
                "WHERE run_id = %s",
                (run_id,),
            ).fetchone()
        return None if row is None else WorkflowRecord(*decoded(row, 2, what="workflow state"))

    def put_workflow(
        self: Pooled, run_id: str, *, workflow: str, state: JSONObject, expected_version: int
    ) -> WorkflowRecord:
        encoded = dump_json(state, what=f"workflow state of {run_id!r}")
        now = self._clock()
        with self._use("put_workflow", block=True) as cur:
            row = cur.execute(
                "SELECT version FROM workflow_state WHERE run_id = %s FOR UPDATE", (run_id,)
            ).fetchone()
            current = 0 if row is None else int(row[0])
            if current != expected_version:
                raise stale_workflow(run_id, current=current, expected=expected_version)
            cur.execute(
                "INSERT INTO workflow_state (run_id, workflow, state, version, updated_at) "
                "SELECT session_id, %s, %s, %s, %s FROM sessions WHERE session_id = %s "
                "ON CONFLICT (run_id) DO UPDATE SET workflow = excluded.workflow, "
                "state = excluded.state, version = excluded.version, "
                "updated_at = excluded.updated_at",
                (workflow, encoded, current + 1, now, run_id),
            )
            if cur.rowcount == 0:
                raise missing("session", run_id)
        return WorkflowRecord(run_id, workflow, load_json(encoded, what="state"), current + 1, now)

    # -- schedules ------------------------------------------------------------------------------

    def put_schedule(self: Pooled, schedule_id: str, record: JSONObject) -> None:
        encoded = dump_json(record, what=f"schedule {schedule_id!r}")
        with self._use("put_schedule") as cur:
            cur.execute(
                "INSERT INTO schedules (schedule_id, record, updated_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (schedule_id) DO UPDATE SET record = excluded.record, "
                "updated_at = excluded.updated_at",
                (schedule_id, encoded, self._clock()),
            )

    def get_schedule(self: Pooled, schedule_id: str) -> JSONDict | None:
        with self._use("get_schedule") as cur:
            row = cur.execute(
                "SELECT record FROM schedules WHERE schedule_id = %s", (schedule_id,)
            ).fetchone()
        return None if row is None else load_json(row[0], what=f"schedule {schedule_id!r}")

    def list_schedules(self: Pooled) -> list[JSONDict]:
        with self._use("list_schedules") as cur:
            rows = cur.execute(
                "SELECT schedule_id, record FROM schedules ORDER BY schedule_id"
            ).fetchall()
        return [load_json(record, what=f"schedule {sid!r}") for sid, record in rows]

    def delete_schedule(self: Pooled, schedule_id: str) -> bool:
        with self._use("delete_schedule") as cur:
            cur.execute("DELETE FROM schedules WHERE schedule_id = %s", (schedule_id,))
            return bool(cur.rowcount)

    # -- lineage --------------------------------------------------------------------------------

    def reopen_edge(self: Pooled, child_id: str) -> LineageEdge:
        with self._use("reopen_edge") as cur:
            row = cur.execute(
                "UPDATE lineage_edges SET status = 'running', completed_at = NULL "
                f"WHERE child_id = %s AND status = 'interrupted' RETURNING {_EDGE_COLUMNS}",
                (child_id,),
            ).fetchone()
        if row is None:
            raise StoreError(
                f"the lineage edge of {child_id!r} is not interrupted, so it cannot reopen",
                child_id=child_id,
            )
        return edge_row(row)


def _listed(
    store: Pooled, action: str, query: str, *, recipient: str | None, limit: int
) -> list[Sequence[Any]]:
    """The rows of ``query`` (which ends in ``WHERE`` or ``AND``) for ``recipient`` (any when
    ``None``), by id, at most ``limit``."""
    if limit < 1:
        raise StoreError(f"{action} limit must be at least 1, got {limit}", limit=limit)
    where, params = ("recipient = %s", (recipient,)) if recipient is not None else ("TRUE", ())
    with store._use(action) as cur:
        rows = cur.execute(f"{query} {where} ORDER BY id LIMIT %s", (*params, limit)).fetchall()
    return list(rows)


def _check_outbox_exists(cur: psycopg.Cursor[Any], item_id: int) -> None:
    if cur.execute("SELECT 1 FROM outbox WHERE id = %s", (item_id,)).fetchone() is None:
        raise missing("outbox item", item_id)


def _outbox(row: Sequence[Any]) -> OutboxItem:
    values = decoded(row, 2, what=f"outbox item {row[0]}")
    values[0] = int(values[0])
    return OutboxItem(*values)


def _dead(row: Sequence[Any]) -> DeadLetter:
    values = decoded(row, 2, what=f"dead letter {row[0]}")
    values[0] = int(values[0])
    return DeadLetter(*values)


def _lease(row: Sequence[Any]) -> Lease:
    run_id, owner, expires_at, acquired_at, generation = row
    return Lease(run_id, owner, float(expires_at), float(acquired_at), int(generation))


def edge_row(row: Sequence[Any]) -> LineageEdge:
    """A ``lineage_edges`` row (in the column order the store selects) as a ``LineageEdge``."""
    return LineageEdge(*decoded(row, 4, what=f"lineage edge of {row[1]!r}"))
