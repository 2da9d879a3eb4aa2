"""The ``SQLiteStore`` statements for run leases, workflow state and reopened lineage edges
(schema migration 5; the dead letters it added are in ``sqlite_outbox``).

``SQLiteDurable`` is a mixin: ``SQLiteStore`` supplies the connection plumbing (``_write`` for
a transaction or savepoint, ``_guard`` for a read, ``_clock``). Each method is one short
statement or a few in one transaction, so a PostgreSQL store fits the same shapes: a lease is
one upsert guarded by ``expires_at < now OR owner = ?``, and a workflow write one update
guarded by its version.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from membrane.errors import StoreError
from membrane.json_types import JSONObject
from membrane.store.base import (
    Lease,
    LineageEdge,
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
from membrane.store.sqlite_schedules import Connected

__all__ = ["SQLiteDurable", "edge_row"]

_LEASE_COLUMNS = "run_id, owner, expires_at, acquired_at, generation"


class SQLiteDurable:
    """Run leases, workflow state and reopened lineage edges in the store's SQLite file."""

    # -- run leases -----------------------------------------------------------------------------

    def claim_lease(self: Connected, run_id: str, *, owner: str, ttl: float) -> Lease:
        now = self._clock()
        with self._write("claim_lease") as conn:
            # One statement when the lease is taken (a fresh run's always is); a look at the
            # holder only when another owner's live lease refused it.
            rows = conn.execute(
                f"INSERT INTO run_leases ({_LEASE_COLUMNS}) VALUES (?, ?, ?, ?, 1) "
                "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, "
                "expires_at = excluded.expires_at, acquired_at = CASE WHEN "
                "run_leases.owner = excluded.owner THEN run_leases.acquired_at "
                "ELSE excluded.acquired_at END, generation = CASE WHEN "
                "run_leases.owner = excluded.owner THEN run_leases.generation "
                "ELSE run_leases.generation + 1 END "
                "WHERE run_leases.owner = excluded.owner OR run_leases.expires_at <= ? "
                f"RETURNING {_LEASE_COLUMNS}",
                (run_id, owner, now + ttl, now, now),
            ).fetchall()
            if not rows:
                rows = conn.execute(
                    f"SELECT {_LEASE_COLUMNS} FROM run_leases WHERE run_id = ?", (run_id,)
                ).fetchall()
        return Lease(*rows[0])

    def release_lease(self: Connected, run_id: str, *, owner: str) -> None:
        with self._write("release_lease") as conn:
            conn.execute("DELETE FROM run_leases WHERE run_id = ? AND owner = ?", (run_id, owner))

    def end_lease(self: Connected, run_id: str, *, owner: str, generation: int) -> None:
        with self._write("end_lease") as conn:
            cursor = conn.execute(
                "DELETE FROM run_leases WHERE run_id = ? AND owner = ? AND generation = ?",
                (run_id, owner, generation),
            )
            if cursor.rowcount == 0:
                row = conn.execute(
                    f"SELECT {_LEASE_COLUMNS} FROM run_leases WHERE run_id = ?", (run_id,)
                ).fetchone()
                raise lease_moved(run_id, None if row is None else Lease(*row), owner=owner)

    def fence(self: Connected, run_id: str, *, owner: str, generation: int) -> None:
        # Inside a transaction (BEGIN IMMEDIATE) no other writer runs until it commits, so the
        # lease read here is still the one in force when the guarded writes commit.
        with self._guard("fence") as conn:
            row = conn.execute(
                f"SELECT {_LEASE_COLUMNS} FROM run_leases WHERE run_id = ?", (run_id,)
            ).fetchone()
        held = None if row is None else Lease(*row)
        if held is None or held.owner != owner or held.generation != generation:
            raise lease_moved(run_id, held, owner=owner)

    def get_lease(self: Connected, run_id: str) -> Lease | None:
        with self._guard("get_lease") as conn:
            row = conn.execute(
                f"SELECT {_LEASE_COLUMNS} FROM run_leases WHERE run_id = ?", (run_id,)
            ).fetchone()
        return None if row is None else Lease(*row)

    def renew_owner_leases(self: Connected, owner: str, *, ttl: float) -> list[str]:
        with self._write("renew_owner_leases") as conn:
            rows = conn.execute(
                "UPDATE run_leases SET expires_at = ? WHERE owner = ? RETURNING run_id",
                (self._clock() + ttl, owner),
            ).fetchall()
        return sorted(row[0] for row in rows)

    def lease_owners(self: Connected) -> list[str]:
        with self._guard("lease_owners") as conn:
            rows = conn.execute("SELECT DISTINCT owner FROM run_leases ORDER BY owner").fetchall()
        return [str(row[0]) for row in rows]

    def expire_owner_leases(self: Connected, owner: str) -> list[str]:
        with self._write("expire_owner_leases") as conn:
            rows = conn.execute(
                "UPDATE run_leases SET expires_at = 0 WHERE owner = ? RETURNING run_id", (owner,)
            ).fetchall()
        return sorted(row[0] for row in rows)

    def release_owner_leases(self: Connected, owner: str) -> None:
        with self._write("release_owner_leases") as conn:
            conn.execute("DELETE FROM run_leases WHERE owner = ?", (owner,))

    def expired_leases(
        self: Connected, *, now: float | None = None, limit: int = 100
    ) -> list[Lease]:
        moment = self._clock() if now is None else now
        with self._guard("expired_leases") as conn:
            rows = conn.execute(
                f"SELECT {_LEASE_COLUMNS} FROM run_leases WHERE expires_at <= ? "
                "ORDER BY expires_at, run_id LIMIT ?",
                (moment, limit),
            ).fetchall()
        return [Lease(*row) for row in rows]

    # -- workflow state -------------------------------------------------------------------------

    def get_workflow(self: Connected, run_id: str) -> WorkflowRecord | None:
        with self._guard("get_workflow") as conn:
            row = conn.execute(
                "SELECT run_id, workflow, state, version, updated_at FROM workflow_state "
                "WHERE run_id = ?",
                (run_id,),
            ).fetchone()
        return None if row is None else _workflow(row)

    def put_workflow(
        self: Connected, run_id: str, *, workflow: str, state: JSONObject, expected_version: int
    ) -> WorkflowRecord:
        encoded = dump_json(state, what=f"workflow state of {run_id!r}")
        now = self._clock()
        with self._write("put_workflow") as conn:
            row = conn.execute(
                "SELECT version FROM workflow_state WHERE run_id = ?", (run_id,)
            ).fetchone()
            current = 0 if row is None else int(row[0])
            if current != expected_version:
                raise stale_workflow(run_id, current=current, expected=expected_version)
            try:
                conn.execute(
                    "INSERT INTO workflow_state (run_id, workflow, state, version, updated_at) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
                    "workflow = excluded.workflow, state = excluded.state, "
                    "version = excluded.version, updated_at = excluded.updated_at",
                    (run_id, workflow, encoded, current + 1, now),
                )
            except sqlite3.IntegrityError as exc:
                raise missing("session", run_id) from exc
        return WorkflowRecord(run_id, workflow, load_json(encoded, what="state"), current + 1, now)

    # -- lineage --------------------------------------------------------------------------------

    def reopen_edge(self: Connected, child_id: str) -> LineageEdge:
        with self._write("reopen_edge") as conn:
            cursor = conn.execute(
                "UPDATE lineage_edges SET status = 'running', completed_at = NULL "
                "WHERE child_id = ? AND status = 'interrupted'",
                (child_id,),
            )
            if cursor.rowcount == 0:
                raise StoreError(
                    f"the lineage edge of {child_id!r} is not interrupted, so it cannot reopen",
                    child_id=child_id,
                )
            row = conn.execute(
                "SELECT parent_id, child_id, child_role, brief_digest, spawn_fingerprint, "
                "status, created_at, result_summary, completed_at FROM lineage_edges "
                "WHERE child_id = ?",
                (child_id,),
            ).fetchone()
        return edge_row(row)


def _workflow(row: tuple[Any, ...]) -> WorkflowRecord:
    return WorkflowRecord(*decoded(row, 2, what=f"workflow state of {row[0]!r}"))


def edge_row(row: tuple[Any, ...]) -> LineageEdge:
    """A ``lineage_edges`` row (in the column order the stores select) as a ``LineageEdge``."""
    return LineageEdge(*decoded(row, 4, what=f"lineage edge of {row[1]!r}"))
