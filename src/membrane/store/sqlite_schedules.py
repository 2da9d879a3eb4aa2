"""Schedule records for ``SQLiteStore``: one JSON record per schedule in ``schedules``.

A mixin, so ``sqlite.py`` keeps to sessions, events, receipts, outbox and lineage. Its methods
use the store's own ``_write`` (a ``BEGIN IMMEDIATE`` of its own, or part of an open
transaction) and ``_guard`` (reads under the store's lock).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Protocol

from membrane.json_types import JSONDict, JSONObject
from membrane.store.rows import (
    dump_json,
    load_json,
)

__all__ = ["Connected", "SQLiteSchedules"]


class Connected(Protocol):
    """What a mixin of ``SQLiteStore`` uses of it: its clock, ``_write`` and ``_guard``."""

    _clock: Callable[[], float]

    def _write(
        self, action: str, *, atomic: bool = True
    ) -> AbstractContextManager[sqlite3.Connection]: ...

    def _guard(self, action: str) -> AbstractContextManager[sqlite3.Connection]: ...


class SQLiteSchedules:
    """The schedule methods of the ``Store`` protocol, on the store's connection."""

    def put_schedule(self: Connected, schedule_id: str, record: JSONObject) -> None:
        encoded = dump_json(record, what=f"schedule {schedule_id!r}")
        with self._write("put_schedule") as conn:
            conn.execute(
                "INSERT INTO schedules (schedule_id, record, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (schedule_id) DO UPDATE SET record = excluded.record, "
                "updated_at = excluded.updated_at",
                (schedule_id, encoded, self._clock()),
            )

    def get_schedule(self: Connected, schedule_id: str) -> JSONDict | None:
        with self._guard("get_schedule") as conn:
            row = conn.execute(
                "SELECT record FROM schedules WHERE schedule_id = ?", (schedule_id,)
            ).fetchone()
        return None if row is None else load_json(row[0], what=f"schedule {schedule_id!r}")

    def list_schedules(self: Connected) -> list[JSONDict]:
        with self._guard("list_schedules") as conn:
            rows = conn.execute(
                "SELECT schedule_id, record FROM schedules ORDER BY schedule_id"
            ).fetchall()
        return [load_json(record, what=f"schedule {sid!r}") for sid, record in rows]

    def delete_schedule(self: Connected, schedule_id: str) -> bool:
        with self._write("delete_schedule") as conn:
            cursor = conn.execute("DELETE FROM schedules WHERE schedule_id = ?", (schedule_id,))
        return bool(cursor.rowcount)
