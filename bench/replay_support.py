"""The raw SQLite limit of the durable benchmarks: the same statements with the same bound
values, replayed by a plain ``sqlite3`` loop. Not a benchmark itself.

``Recorder.attach(store)`` records every write statement a ``SQLiteStore``'s connection runs,
with its parameters, as the store passes them (the trace callback would give the statement text
with the values spelled out, which a raw loop would have to compile again every time: an
unfairly slow limit). ``mark()`` closes one unit of work (a start, a message). ``replay``
writes each unit's rows again, in one ``BEGIN IMMEDIATE`` ... ``COMMIT`` per unit (or in the
store's own transactions), on a fresh
file of the same schema (the store's migrations make it) under the same synchronous mode: the
rows Membrane wrote, each statement prepared once and reused as the store's own cache does.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from membrane.store import SQLiteStore

__all__ = ["Recorder", "replay"]

_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "WITH")
_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")

Statement = tuple[str, Sequence[object]]


class _Recording:
    """A connection (or a cursor) that records its write statements and hands everything to
    ``conn``."""

    def __init__(
        self, conn: sqlite3.Connection | sqlite3.Cursor, log: list[Statement], counts: list[int]
    ) -> None:
        self._conn = conn
        self._log = log
        self._counts = counts

    def execute(self, sql: str, parameters: Sequence[object] = ()) -> sqlite3.Cursor:
        self._counts[0] += 1
        if sql.lstrip()[:9].upper().startswith(_WRITES + _CONTROL):
            self._log.append((sql, tuple(parameters)))
        return self._conn.execute(sql, parameters)

    def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> sqlite3.Cursor:
        self._counts[0] += 1
        rows = [tuple(row) for row in rows]
        for row in rows:
            self._log.append((sql, row))
        return self._conn.executemany(sql, rows)

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


class Recorder:
    """The write statements of each unit of work, in order."""

    def __init__(self) -> None:
        #: What was written before ``clear()`` (the warm-up), replayed untimed first.
        self.prelude: list[Statement] = []
        self.units: list[list[Statement]] = []
        self._current: list[Statement] = []
        #: Every statement the store's connection ran since ``clear()``, reads included (a
        #: count kept here, not by a trace callback: SQLite expanding each statement's text
        #: for one would cost Membrane's side time the raw loop never spends).
        self._counts = [0]

    @property
    def executed(self) -> int:
        return self._counts[0]

    def attach(self, store: SQLiteStore) -> None:
        conn = _Recording(store._conn, self._current, self._counts)  # type: ignore[arg-type]
        store._conn = conn  # type: ignore[assignment]
        cursor = _Recording(store._cursor, self._current, self._counts)
        store._cursor = cursor  # type: ignore[assignment]

    def clear(self) -> None:
        """Start counting: what was recorded so far becomes the prelude."""
        self.prelude += [s for unit in self.units for s in unit] + self._current
        self.units.clear()
        self._current.clear()
        self._counts[0] = 0

    def mark(self) -> None:
        self.units.append(list(self._current))
        self._current.clear()

    def verbs(self) -> list[str]:
        """The first unit's statements, ``VERB table`` each (what the loop replays)."""
        first = self.units[0] if self.units else []
        return [" ".join(sql.split()[:3:2]) for sql, _ in first if not _control(sql)]


def replay(
    recorder: Recorder,
    db: Path,
    *,
    synchronous: Literal["full", "normal"],
    as_recorded: bool = False,
    syncs: int | None = None,
) -> float:
    """Seconds a raw loop takes to write the recorder's units again, one transaction each (or,
    ``as_recorded``, in the transactions the store made), on a fresh file ``db`` of the store's
    schema, after its prelude (untimed). With ``syncs``, the loop also ``fsync``s the WAL that
    many times in all, after its units, spread over them as evenly as the count allows: what a
    store syncing once per barrier paid, where ``synchronous=FULL`` would sync every commit."""
    SQLiteStore(db).close()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
    conn.execute("PRAGMA foreign_keys = ON")
    execute = conn.execute
    execute("BEGIN IMMEDIATE")
    for sql, parameters in recorder.prelude:
        if not _control(sql):
            execute(sql, parameters).fetchall()
    execute("COMMIT")
    units = recorder.units
    if not as_recorded:
        units = [
            [("BEGIN IMMEDIATE", ()), *(s for s in unit if not _control(s[0])), ("COMMIT", ())]
            for unit in units
        ]
    wal = os.open(f"{db}-wal", os.O_RDWR | os.O_CREAT, 0o644) if syncs else None
    # After unit i, sync until syncs * (i + 1) / len(units) syncs are done.
    plan = [0] * len(units)
    if syncs:
        for i in range(len(units)):
            plan[i] = syncs * (i + 1) // len(units) - syncs * i // len(units)
    begin = time.perf_counter()
    for unit, due in zip(units, plan, strict=True):
        for sql, parameters in unit:
            execute(sql, parameters).fetchall()
        for _ in range(due):
            os.fsync(wal)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - begin
    conn.close()
    if wal is not None:
        os.close(wal)
    return elapsed


def _control(sql: str) -> bool:
    return sql.lstrip()[:9].upper().startswith(_CONTROL)
