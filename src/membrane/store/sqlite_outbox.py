"""The outbox's statements for ``SQLiteStore``: its items, their attempts, and the dead letters.

A mixin, like ``sqlite_schedules``: its methods use the store's own ``_write`` (a ``BEGIN
IMMEDIATE`` of its own, or part of an open transaction) and ``_guard`` (reads under the store's
lock). An item is one row of ``outbox`` until it is delivered; one that exhausted its attempts
moves to ``outbox_dead`` (buried) and can be revived under the same id.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from membrane.errors import StoreError
from membrane.json_types import JSONObject
from membrane.store.base import (
    DeadLetter,
    OutboxItem,
)
from membrane.store.rows import (
    decoded,
    dump_json,
    load_json,
    missing,
)
from membrane.store.sqlite_schedules import Connected

__all__ = ["SQLiteOutbox"]

_OUTBOX_COLUMNS = "id, recipient, payload, attempts, next_attempt_at, created_at, delivered_at"
_DEAD_COLUMNS = "id, recipient, payload, attempts, created_at, last_error, dead_at"


class SQLiteOutbox:
    """The outbox methods of the ``Store`` protocol, on the store's connection."""

    # -- items -------------------------------------------------------------------------------

    def enqueue_outbox(
        self: Connected, recipient: str, payload: JSONObject, *, not_before: float | None = None
    ) -> int:
        encoded = dump_json(payload, what=f"outbox payload for {recipient!r}")
        now = self._clock()
        with self._write("enqueue_outbox") as conn:
            cursor = conn.execute(
                "INSERT INTO outbox (recipient, payload, next_attempt_at, created_at) "
                "VALUES (?, ?, ?, ?)",
                (recipient, encoded, now if not_before is None else not_before, now),
            )
            return int(cursor.lastrowid or 0)

    def due_outbox(
        self: Connected, *, now: float | None = None, limit: int = 100
    ) -> list[OutboxItem]:
        if limit < 1:
            raise StoreError(f"due_outbox limit must be at least 1, got {limit}", limit=limit)
        with self._guard("due_outbox") as conn:
            rows = conn.execute(
                f"SELECT {_OUTBOX_COLUMNS} FROM outbox "
                "WHERE delivered_at IS NULL AND next_attempt_at <= ? ORDER BY id LIMIT ?",
                (self._clock() if now is None else now, limit),
            ).fetchall()
        return [_outbox(row) for row in rows]

    def pending_outbox(
        self: Connected, *, recipient: str | None = None, limit: int = 100
    ) -> list[OutboxItem]:
        query = f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE delivered_at IS NULL AND"
        rows = _listed(self, "pending_outbox", query, recipient=recipient, limit=limit)
        return [_outbox(row) for row in rows]

    def next_outbox_attempt(self: Connected) -> float | None:
        with self._guard("next_outbox_attempt") as conn:
            row = conn.execute(
                "SELECT MIN(next_attempt_at) FROM outbox WHERE delivered_at IS NULL"
            ).fetchone()
        return None if row[0] is None else float(row[0])

    def mark_attempt(self: Connected, item_id: int, *, next_attempt_at: float) -> OutboxItem:
        with self._write("mark_attempt") as conn:
            cursor = conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ? "
                "WHERE id = ? AND delivered_at IS NULL",
                (next_attempt_at, item_id),
            )
            if cursor.rowcount == 0:
                _check_outbox_exists(conn, item_id)
                raise StoreError(f"outbox item {item_id} is already delivered", item_id=item_id)
            row = conn.execute(
                f"SELECT {_OUTBOX_COLUMNS} FROM outbox WHERE id = ?", (item_id,)
            ).fetchone()
            return _outbox(row)

    def mark_delivered(self: Connected, item_id: int) -> None:
        with self._write("mark_delivered") as conn:
            cursor = conn.execute(
                "UPDATE outbox SET delivered_at = ? WHERE id = ? AND delivered_at IS NULL",
                (self._clock(), item_id),
            )
            if cursor.rowcount == 0:
                _check_outbox_exists(conn, item_id)

    # -- attempts and dead letters -----------------------------------------------------------

    def postpone_outbox(self: Connected, item_id: int, *, next_attempt_at: float) -> None:
        with self._write("postpone_outbox") as conn:
            conn.execute(
                "UPDATE outbox SET next_attempt_at = ? WHERE id = ? AND delivered_at IS NULL",
                (next_attempt_at, item_id),
            )

    def note_outbox_error(self: Connected, item_id: int, error: str) -> None:
        with self._write("note_outbox_error") as conn:
            conn.execute(
                "UPDATE outbox SET last_error = ? WHERE id = ? AND delivered_at IS NULL",
                (str(error), item_id),
            )

    def outbox_error(self: Connected, item_id: int) -> str | None:
        with self._guard("outbox_error") as conn:
            row = conn.execute("SELECT last_error FROM outbox WHERE id = ?", (item_id,)).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def bury_outbox(self: Connected, item_id: int, *, error: str) -> DeadLetter:
        now = self._clock()
        with self._write("bury_outbox") as conn:
            row = conn.execute(
                "SELECT recipient, payload, attempts, created_at FROM outbox "
                "WHERE id = ? AND delivered_at IS NULL",
                (item_id,),
            ).fetchone()
            if row is None:
                raise missing("undelivered outbox item", item_id)
            conn.execute(
                f"INSERT INTO outbox_dead ({_DEAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (item_id, row[0], row[1], row[2], row[3], str(error), now),
            )
            conn.execute("DELETE FROM outbox WHERE id = ?", (item_id,))
            found = conn.execute(
                f"SELECT {_DEAD_COLUMNS} FROM outbox_dead WHERE id = ?", (item_id,)
            ).fetchone()
        return _dead(found)

    def dead_outbox(
        self: Connected, *, recipient: str | None = None, limit: int = 100
    ) -> list[DeadLetter]:
        query = f"SELECT {_DEAD_COLUMNS} FROM outbox_dead WHERE"
        rows = _listed(self, "dead_outbox", query, recipient=recipient, limit=limit)
        return [_dead(row) for row in rows]

    def revive_outbox(self: Connected, item_id: int) -> OutboxItem:
        now = self._clock()
        with self._write("revive_outbox") as conn:
            row = conn.execute(
                "SELECT recipient, payload, created_at, last_error FROM outbox_dead WHERE id = ?",
                (item_id,),
            ).fetchone()
            if row is None:
                raise missing("dead letter", item_id)
            conn.execute(
                "INSERT INTO outbox (id, recipient, payload, attempts, next_attempt_at, "
                "created_at, last_error) VALUES (?, ?, ?, 0, ?, ?, ?)",
                (item_id, row[0], row[1], now, row[2], row[3]),
            )
            conn.execute("DELETE FROM outbox_dead WHERE id = ?", (item_id,))
        return OutboxItem(
            id=item_id,
            recipient=row[0],
            payload=load_json(row[1], what=f"outbox item {item_id}"),
            attempts=0,
            next_attempt_at=now,
            created_at=row[2],
        )


def _listed(
    store: Connected, action: str, query: str, *, recipient: str | None, limit: int
) -> list[tuple[Any, ...]]:
    """The rows of ``query`` (which ends in ``WHERE`` or ``AND``) for ``recipient`` (any when
    ``None``), by id, at most ``limit``."""
    if limit < 1:
        raise StoreError(f"{action} limit must be at least 1, got {limit}", limit=limit)
    where, params = ("recipient = ?", (recipient,)) if recipient is not None else ("1", ())
    with store._guard(action) as conn:
        rows = conn.execute(f"{query} {where} ORDER BY id LIMIT ?", (*params, limit)).fetchall()
    return list(rows)


def _check_outbox_exists(conn: sqlite3.Connection, item_id: int) -> None:
    if conn.execute("SELECT 1 FROM outbox WHERE id = ?", (item_id,)).fetchone() is None:
        raise missing("outbox item", item_id)


def _outbox(row: tuple[Any, ...]) -> OutboxItem:
    return OutboxItem(*decoded(row, 2, what=f"outbox item {row[0]}"))


def _dead(row: tuple[Any, ...]) -> DeadLetter:
    return DeadLetter(*decoded(row, 2, what=f"dead letter {row[0]}"))
