"""``SQLiteStore``: the embedded, durable default store.

One file in WAL mode (readers never block the writer, and several processes may share it) and
``foreign_keys=ON`` so events and lineage edges cannot outlive their session.

Durability is group commit (``sqlite_flush``): the store's connection commits without syncing,
and a flusher thread per store syncs the WAL for every commit made since its last pass. Under
``synchronous="full"`` (the default) ``barrier()`` waits for that sync, so what a caller
acknowledges after it survives a power loss; the event loop itself never waits for the disk.
``group_commit=False`` keeps the older path: every ``COMMIT`` syncs on the committing thread.

Thread safety: one connection guarded by a re-entrant lock; a transaction holds the lock from
``BEGIN`` to ``COMMIT``, so other threads wait for it. Calls are short (no fsync), which suits
the asyncio runtime calling them directly. A transaction must not span an ``await``: another
task on the same thread would join it.

Every ``sqlite3`` error is translated at this boundary into ``StoreError``.

This module holds the connection, sessions, events, transcripts, receipts and lineage; the
outbox and its dead letters are in ``sqlite_outbox``, leases and workflow state in
``sqlite_durable``, schedules in ``sqlite_schedules`` (mixins on the same connection).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Unpack

from membrane.config.values import Retention
from membrane.errors import StoreDamaged, StoreError, StoreNotMembrane
from membrane.json_types import JSONDict, JSONObject
from membrane.store.base import (
    BUDGET_KEY,
    EdgeStatus,
    LineageEdge,
    NewEdge,
    PruneReport,
    Receipt,
    SessionHeader,
    Store,
    StoredEvent,
)
from membrane.store.location import refuse_checkout
from membrane.store.migrations import (
    APPLICATION_ID,
    MIGRATIONS,
    Migration,
    check_identity,
    migrate,
)
from membrane.store.rows import (
    check_edge_status,
    check_start,
    dump_json,
    dump_messages,
    edge_ended,
    edge_exists,
    ledger_of,
    load_json,
    loadable_edges,
    missing,
    session_depth,
)
from membrane.store.sqlite_durable import SQLiteDurable, edge_row
from membrane.store.sqlite_flush import Flusher
from membrane.store.sqlite_outbox import SQLiteOutbox
from membrane.store.sqlite_prune import prune as prune_rows
from membrane.store.sqlite_schedules import SQLiteSchedules

__all__ = ["SQLiteStore", "check_file", "check_wal"]

#: Rows per INSERT of transcript messages (3 parameters each, well under SQLite's limit).
_ROWS_PER_INSERT = 256

_SESSION_COLUMNS = (
    "session_id, agent, parent_id, delegation_depth, status, provider, created_at, request_id, "
    "meta, result"
)
_RECEIPT_COLUMNS = "request_id, kind, status, result, created_at, completed_at, owner"
_EDGE_COLUMNS = (
    "parent_id, child_id, child_role, brief_digest, spawn_fingerprint, status, created_at, "
    "result_summary, completed_at"
)


class SQLiteStore(SQLiteSchedules, SQLiteOutbox, SQLiteDurable, Store):
    """A ``Store`` in one SQLite file, created (with its folder) when absent.

    ``timeout`` is how long a write waits for another process's transaction to finish.
    ``synchronous="full"`` (the default): ``barrier()`` returns once every commit made before
    it is synced to disk, so what is acknowledged after it survives power loss; ``"normal"``
    syncs only at checkpoints and ``barrier()`` returns at once: a commit still survives the
    process being killed, but the last ones may be lost if the machine itself goes down.
    Either way a ``COMMIT`` never waits for the disk: the flusher thread syncs (group commit).
    ``group_commit=False`` syncs every ``COMMIT`` on the thread that commits, as SQLite's own
    ``synchronous`` setting does (the path before group commit, kept for comparison).
    ``fsync`` is what the flusher syncs the WAL with (``os.fsync``); it runs on the flusher's
    thread only. ``clock`` stamps rows (seconds since the epoch). ``migrations`` exists for
    upgrade tests. ``trace``, when given, is called with the text of every SQL statement the
    store's connection runs (after it opened), for diagnostics and for counting what an
    operation costs.

    A new file is refused (``state-inside-checkout``) inside a git checkout or a project
    folder (one holding ``.membrane``), where a child writing in its checkout could change it
    (DESIGN rule 9), unless it is a project's state location under a Membrane home
    (``membrane.store.location.refuse_checkout``); ``allow_checkout=True`` creates it anyway
    (a migration tool, a test of the legacy location). An existing file always opens.

    ``read_only=True`` (what the read commands use) opens an existing store without writing
    it or anything beside it: no WAL switch, no migration, no checkpoint, no flusher; a write
    then fails with ``store-error``. See ``_open_read_only``.
    """

    remote = False

    def __init__(
        self,
        path: str | Path,
        *,
        timeout: float = 30.0,
        synchronous: Literal["full", "normal"] = "full",
        group_commit: bool = True,
        fsync: Callable[[int], object] = os.fsync,
        clock: Callable[[], float] = time.time,
        migrations: tuple[Migration, ...] = MIGRATIONS,
        trace: Callable[[str], object] | None = None,
        allow_checkout: bool = False,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.RLock()
        self._nesting = 0
        #: One ``_Joined`` per action, reused: a call inside this thread's own transaction.
        self._joined: dict[str, _Joined] = {}
        self._conn: sqlite3.Connection | None = None
        self._flusher: Flusher | None = None
        where = str(self.path)
        if synchronous not in ("full", "normal"):
            raise StoreError(
                f"synchronous must be 'full' or 'normal', got {synchronous!r}", path=where
            )
        if read_only:
            self._conn = _open_read_only(self.path, timeout, migrations)
            self.schema_version = migrations[-1].version if migrations else 0
            self._cursor = self._conn.cursor()
            return
        if not allow_checkout and not self.path.exists():
            refuse_checkout(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the folder for {where}: {exc}", path=where) from exc
        check_wal(self.path)
        try:
            conn = sqlite3.connect(
                where, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {where} as a Membrane store: {exc}", path=where) from exc
        try:
            # Before anything is written (switching to WAL rewrites the header): a file that is
            # not Membrane's is left exactly as it was. ``migrate`` checks again under its lock.
            check_identity(conn, where)
            if not conn.execute("SELECT 1 FROM sqlite_schema LIMIT 1").fetchone():
                # A new store gives pages freed by retention back (``prune``); chosen before
                # the first table, as SQLite requires.
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA temp_store = MEMORY")  # prune's id table: no file of its own
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(
                    f"{where} cannot use WAL journaling (got {mode!r}); "
                    "put the store on a local file system",
                    path=where,
                )
            conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self.schema_version = migrate(conn, path=where, migrations=migrations)
            if group_commit:
                # COMMIT writes the WAL and returns; the flusher syncs and checkpoints.
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA wal_autocheckpoint = 0")
                self._flusher = Flusher(
                    self.path,
                    wait=synchronous == "full",
                    writer=self._lock,
                    fsync=fsync,
                    timeout=timeout,
                )
        except sqlite3.DatabaseError as exc:
            conn.close()
            if "not a database" in str(exc):
                raise StoreNotMembrane(
                    f"{where} is not a SQLite database, so not a Membrane store ({exc}); "
                    "Membrane will not write to it: point the state at another file",
                    path=where,
                ) from exc
            if "malformed" in str(exc) or "corrupt" in str(exc):
                raise StoreDamaged(
                    f"{where} is damaged ({exc}); run `membrane doctor`, restore it from a "
                    "copy, or move it aside to start a new store",
                    path=where,
                    problems=[str(exc)],
                ) from exc
            raise StoreError(f"cannot open {where} as a Membrane store: {exc}", path=where) from exc
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(f"cannot open {where} as a Membrane store: {exc}", path=where) from exc
        except BaseException:
            conn.close()
            raise
        if trace is not None:
            conn.set_trace_callback(trace)
        self._conn = conn
        #: The cursor of the statements that run to completion at once (BEGIN, COMMIT, a
        #: plain INSERT or UPDATE), reused under the lock: ``Connection.execute`` makes a new
        #: cursor for every statement. A statement that returns rows keeps its own cursor, so
        #: none is left half-read across another.
        self._cursor = conn.cursor()

    # -- plumbing -----------------------------------------------------------------------------

    def _guard(self, action: str) -> AbstractContextManager[sqlite3.Connection]:
        """The connection under the store's lock, ``sqlite3`` errors raised as ``StoreError``."""
        if self._nesting and self._lock._is_owned():  # type: ignore[attr-defined]
            return self._joined_for(action)
        return _Held(self, action)

    def _write(
        self, action: str, *, atomic: bool = True
    ) -> AbstractContextManager[sqlite3.Connection]:
        """One write. Outside a transaction it is its own ``BEGIN IMMEDIATE``/``COMMIT``.
        Inside one, an ``atomic`` write (its changes are one statement, or it raises before
        changing anything) runs bare: SQLite undoes a failed statement by itself, so a
        savepoint would only cost two statements. Others get a savepoint."""
        if atomic and self._nesting and self._lock._is_owned():  # type: ignore[attr-defined]
            return self._joined_for(action)  # inside this thread's own transaction
        return _Enclosed(self, action, atomic=atomic)

    def _joined_for(self, action: str) -> _Joined:
        joined = self._joined.get(action)
        if joined is None:
            joined = self._joined[action] = _Joined(self, action)
        return joined

    def transaction(self) -> AbstractContextManager[None]:
        return _Transaction(self)

    async def barrier(self) -> None:
        if self._flusher is not None:
            await self._flusher.barrier()

    def prune(self, retention: Retention, *, now: float | None = None) -> PruneReport:
        """Delete the finished runs ``retention`` lets go of, with their events, transcripts,
        delivered notices, completed receipts, dead letters and lineage (or all but a summary:
        ``membrane.store.sqlite_prune``), in one transaction; then give the freed pages back to
        the file system (``PRAGMA incremental_vacuum``; a store made before retention existed
        is vacuumed whole once to turn that on). ``now``: the clock's time by default."""
        if not isinstance(retention, Retention):
            raise StoreError("prune takes the settings' Retention", got=type(retention).__name__)
        now = self._clock() if now is None else now
        day = 86_400.0
        before = {status: now - days * day for status, days in retention.runs_days.items()}
        dead = (
            None if retention.dead_letters_days is None else now - retention.dead_letters_days * day
        )
        with self._write("prune", atomic=False) as conn:
            counts = prune_rows(
                conn,
                before=before,
                keep=retention.keep_runs,
                dead_before=dead,
                lineage=retention.lineage,
            )
        return PruneReport(**counts, freed_bytes=self._vacuum())

    def _vacuum(self) -> int:
        """Give the store's free pages back to the file system; the bytes given back."""
        with self._guard("vacuum") as conn:
            size = int(conn.execute("PRAGMA page_size").fetchone()[0])
            free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
            if not free:
                return 0
            if int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) != 2:
                # Incremental vacuum is chosen before the first table; an older store is
                # rewritten once with it (VACUUM needs no transaction open on the file).
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                conn.execute("VACUUM")
            else:
                # sqlite3_exec steps it to the end; one step of ``execute`` frees one page.
                conn.executescript("PRAGMA incremental_vacuum;")
            return (free - int(conn.execute("PRAGMA freelist_count").fetchone()[0])) * size

    def quick_check(self) -> list[str]:
        """What SQLite's ``PRAGMA quick_check`` finds wrong with the file (empty when nothing):
        a read of every page, in time linear in the file's size."""
        with self._guard("quick_check") as conn:
            rows = conn.execute("PRAGMA quick_check").fetchall()
        return _problems(rows)

    def close(self) -> None:
        """Sync and checkpoint what was committed, then close (idempotent)."""
        with self._lock:
            if self._flusher is not None:
                self._flusher.close()
                self._flusher = None
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    # -- sessions and events ------------------------------------------------------------------

    def create_session(self, header: SessionHeader) -> None:
        depth = session_depth(header.delegation_depth, session_id=header.session_id, stored=False)
        meta = dump_json(header.meta, what="meta of session", of=header.session_id)
        result = (
            None
            if header.result is None
            else dump_json(header.result, what="result of session", of=header.session_id)
        )
        now = self._clock()
        with self._write("create_session"):
            try:
                self._cursor.execute(
                    f"INSERT INTO sessions ({_SESSION_COLUMNS}, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        header.session_id,
                        header.agent,
                        header.parent_id,
                        depth,
                        header.status,
                        header.provider,
                        header.created_at or now,
                        header.request_id,
                        meta,
                        result,
                        now,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise StoreError(
                    f"session {header.session_id!r} already exists; session ids are unique",
                    session_id=header.session_id,
                ) from exc

    def get_header(self, session_id: str) -> SessionHeader | None:
        with self._guard("get_header") as conn:
            row = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
        return None if row is None else _header(row)

    def set_status(self, session_id: str, status: str, *, result: JSONObject | None = None) -> None:
        encoded = dump_json(result, what="result of session", of=session_id)
        with self._write("set_status"):
            cursor = self._cursor.execute(
                "UPDATE sessions SET status = ?, result = COALESCE(?, result), updated_at = ? "
                "WHERE session_id = ?",
                (status, encoded, self._clock(), session_id),
            )
            if cursor.rowcount == 0:
                raise missing("session", session_id)

    def list_sessions(self, *, parent_id: str | None = None) -> list[SessionHeader]:
        query = f"SELECT {_SESSION_COLUMNS} FROM sessions"
        params: tuple[Any, ...] = ()
        if parent_id is not None:
            query, params = query + " WHERE parent_id = ?", (parent_id,)
        with self._guard("list_sessions") as conn:
            rows = conn.execute(query + " ORDER BY created_at, rowid", params).fetchall()
        return [_header(row) for row in rows]

    def page_sessions(
        self,
        *,
        limit: int,
        after: str | None = None,
        parent_id: str | None = None,
        meta: tuple[str, str] | None = None,
    ) -> list[SessionHeader]:
        where, params = ["1"], []
        if after is not None:
            where.append("rowid > (SELECT rowid FROM sessions WHERE session_id = ?)")
            params.append(after)
        if parent_id is not None:
            where.append("parent_id = ?")
            params.append(parent_id)
        if meta is not None:
            where.append("json_extract(meta, ?) = ?")
            params += [f'$."{meta[0]}"', meta[1]]
        query = (
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE {' AND '.join(where)} "
            "ORDER BY rowid LIMIT ?"
        )
        with self._guard("page_sessions") as conn:
            if (
                after is not None
                and not conn.execute(
                    "SELECT 1 FROM sessions WHERE session_id = ?", (after,)
                ).fetchone()
            ):
                raise missing("session", after)
            rows = conn.execute(query, (*params, max(0, limit))).fetchall()
        return [_header(row) for row in rows]

    def append_event(self, session_id: str, kind: str, data: JSONObject) -> int:
        encoded = dump_json(data, what="data of event", of=kind)
        with self._write("append_event"):
            try:
                cursor = self._cursor.execute(
                    "INSERT INTO events (session_id, kind, data, at) VALUES (?, ?, ?, ?)",
                    (session_id, kind, encoded, self._clock()),
                )
            except sqlite3.IntegrityError as exc:
                raise missing("session", session_id) from exc
            return int(cursor.lastrowid or 0)

    def events(self, *, session_id: str | None = None, after: int = 0) -> list[StoredEvent]:
        query = "SELECT seq, session_id, kind, data, at FROM events WHERE seq > ?"
        params: tuple[Any, ...] = (after,)
        if session_id is not None:
            query, params = query + " AND session_id = ?", (after, session_id)
        with self._guard("events") as conn:
            rows = conn.execute(query + " ORDER BY seq", params).fetchall()
        return [
            StoredEvent(seq, sid, kind, load_json(data, what=f"event {seq}"), at)
            for seq, sid, kind, data, at in rows
        ]

    def update_meta(self, session_id: str, values: JSONObject) -> None:
        dump_json(values, what=f"meta update of session {session_id!r}")
        with self._write("update_meta") as conn:
            row = conn.execute(
                "SELECT meta FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise missing("session", session_id)
            meta = load_json(row[0], what=f"meta of session {session_id!r}")
            meta.update(values)
            conn.execute(
                "UPDATE sessions SET meta = ?, updated_at = ? WHERE session_id = ?",
                (
                    dump_json(meta, what=f"meta of session {session_id!r}"),
                    self._clock(),
                    session_id,
                ),
            )

    # -- budget ledgers ----------------------------------------------------------------------

    def lock_ledger(self, owner: str) -> JSONDict | None:
        # A charge runs in a write transaction (BEGIN IMMEDIATE): no other writer can read
        # and write this ledger between this read and the charge's write.
        with self._guard("lock_ledger") as conn:
            row = conn.execute(
                "SELECT meta FROM sessions WHERE session_id = ?", (owner,)
            ).fetchone()
        if row is None:
            return None
        return ledger_of(load_json(row[0], what=f"meta of session {owner!r}"))

    def write_ledger(self, owner: str, ledger: JSONObject) -> None:
        with self._write("write_ledger", atomic=False) as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (owner,)).fetchone():
                self.update_meta(owner, {BUDGET_KEY: ledger})

    # -- transcripts --------------------------------------------------------------------------

    def append_messages(
        self, session_id: str, messages: Sequence[JSONObject], *, start: int
    ) -> int:
        encoded = dump_messages(messages, session_id=session_id, start=start)
        # One INSERT per chunk of rows; a single chunk needs no savepoint to be atomic.
        chunks = [
            encoded[i : i + _ROWS_PER_INSERT] for i in range(0, len(encoded), _ROWS_PER_INSERT)
        ]
        if type(start) is not int or start < 0 or not chunks:
            with self._guard("append_messages") as conn:
                length = self._transcript_length(conn, session_id)
            check_start(start, session_id=session_id, length=length)
            return start
        with self._write("append_messages", atomic=len(chunks) <= 1) as conn:
            # The first INSERT carries the length check: its rows go in only where the stored
            # transcript ends at ``start`` (its last position read from the end of the primary
            # key), so an append is no read and one statement. When nothing went in, the read
            # says why, with the error a separate check would have raised.
            chunk = chunks[0]
            values = ", ".join(["(?, ?)"] * len(chunk))
            params: list[object] = [session_id]
            for offset, text in enumerate(chunk):
                params += (start + offset, text)
            params += (session_id, start)
            try:
                added = conn.execute(
                    "INSERT INTO messages (session_id, idx, data) SELECT ?, column1, column2 "
                    f"FROM (VALUES {values}) WHERE COALESCE((SELECT idx FROM messages WHERE "
                    "session_id = ? ORDER BY idx DESC LIMIT 1) + 1, 0) = ?",
                    params,
                ).rowcount
            except sqlite3.IntegrityError:
                added = 0  # no such session: the read below names it
            if added != len(chunk):
                check_start(
                    start, session_id=session_id, length=self._transcript_length(conn, session_id)
                )
                raise StoreError(
                    f"the messages of session {session_id!r} could not be appended at {start}",
                    session_id=session_id,
                )
            at = start + len(chunk)
            for chunk in chunks[1:]:
                rows = ", ".join(["(?, ?, ?)"] * len(chunk))
                params = []
                for offset, text in enumerate(chunk):
                    params += (session_id, at + offset, text)
                self._cursor.execute(
                    f"INSERT INTO messages (session_id, idx, data) VALUES {rows}", params
                )
                at += len(chunk)
            return at

    def transcript(self, session_id: str) -> list[JSONDict]:
        with self._guard("transcript") as conn:
            self._require_session(conn, session_id)
            rows = conn.execute(
                "SELECT idx, data FROM messages WHERE session_id = ? ORDER BY idx", (session_id,)
            ).fetchall()
        messages: list[JSONDict] = []
        for idx, data in rows:
            if idx != len(messages):
                raise StoreError(
                    f"the transcript of session {session_id!r} has no message {len(messages)} "
                    "(the store is corrupt); repair or remove the session",
                    session_id=session_id,
                )
            messages.append(load_json(data, what=f"message {idx} of session {session_id!r}"))
        return messages

    def transcript_length(self, session_id: str) -> int:
        with self._guard("transcript_length") as conn:
            return self._transcript_length(conn, session_id)

    @staticmethod
    def _transcript_length(conn: sqlite3.Connection, session_id: str) -> int:
        """One indexed lookup, whatever the length: positions are 0, 1, ... without gaps (the
        append check keeps them so), so the length is the last position + 1, read from the
        end of the primary key; never a count of the rows."""
        exists, last = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM sessions WHERE session_id = ?), "
            "(SELECT idx FROM messages WHERE session_id = ? ORDER BY idx DESC LIMIT 1)",
            (session_id, session_id),
        ).fetchone()
        if not exists:
            raise missing("session", session_id)
        return 0 if last is None else int(last) + 1

    @staticmethod
    def _require_session(conn: sqlite3.Connection, session_id: str) -> None:
        found = conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,))
        if found.fetchone() is None:
            raise missing("session", session_id)

    # -- receipts -----------------------------------------------------------------------------

    def begin_receipt(
        self, request_id: str, *, kind: str, owner: str | None = None
    ) -> Receipt | None:
        with self._write("begin_receipt") as conn:
            cursor = self._cursor.execute(
                "INSERT INTO receipts (request_id, kind, status, created_at, owner) "
                "VALUES (?, ?, 'pending', ?, ?) ON CONFLICT (request_id) DO NOTHING",
                (request_id, kind, self._clock(), owner),
            )
            if cursor.rowcount == 1:
                return None
            existing = self._receipt(conn, request_id)
            assert existing is not None  # the conflict proves the row exists
            if existing.kind != kind:
                raise StoreError(
                    f"request id {request_id!r} was used for a {existing.kind!r}, "
                    f"not a {kind!r}; request ids must be unique per action",
                    request_id=request_id,
                    kind=existing.kind,
                )
            return existing

    def complete_receipt(self, request_id: str, result: JSONObject) -> Receipt:
        encoded = dump_json(result, what="result of request", of=request_id)
        with self._write("complete_receipt") as conn:
            # One statement when the receipt was pending (a start's always is): the row comes
            # back with the update; a look at it only to say why nothing was updated.
            row = conn.execute(
                "UPDATE receipts SET status = 'completed', result = ?, completed_at = ? "
                f"WHERE request_id = ? AND status = 'pending' RETURNING {_RECEIPT_COLUMNS}",
                (encoded, self._clock(), request_id),
            ).fetchone()
            if row is not None:
                return _receipt_row(row)
            if self._receipt(conn, request_id) is None:
                raise missing("receipt", request_id)
            raise StoreError(
                f"receipt {request_id!r} is already completed; replay its result instead",
                request_id=request_id,
            )

    def get_receipt(self, request_id: str) -> Receipt | None:
        with self._guard("get_receipt") as conn:
            return self._receipt(conn, request_id)

    def release_receipt(self, request_id: str, *, owner: str | None = None) -> None:
        with self._write("release_receipt") as conn:
            held = "" if owner is None else " AND owner = ?"
            cursor = conn.execute(
                f"DELETE FROM receipts WHERE request_id = ? AND status = 'pending'{held}",
                (request_id,) if owner is None else (request_id, owner),
            )
            if cursor.rowcount > 0 or owner is not None:
                return
            if self._receipt(conn, request_id) is not None:
                raise StoreError(
                    f"receipt {request_id!r} is completed, so it cannot be released; replay "
                    "its result instead",
                    request_id=request_id,
                )

    def reap_pending_receipts(
        self, *, older_than: float, owners: Collection[str] = (), spare: Collection[str] = ()
    ) -> list[str]:
        gone, kept = sorted(set(owners)), sorted(set(spare))
        old = "created_at < ?"
        if kept:
            old += f" AND (owner IS NULL OR owner NOT IN ({', '.join('?' * len(kept))}))"
        held = f" OR owner IN ({', '.join('?' * len(gone))})" if gone else ""
        stale = f"FROM receipts WHERE status = 'pending' AND (({old}){held})"
        values = (older_than, *kept, *gone)
        with self._write("reap_pending_receipts") as conn:
            rows = conn.execute(f"SELECT request_id {stale}", values).fetchall()
            conn.execute(f"DELETE {stale}", values)
        return sorted(row[0] for row in rows)

    def pending_receipt_owners(self) -> list[str]:
        with self._guard("pending_receipt_owners") as conn:
            rows = conn.execute(
                "SELECT DISTINCT owner FROM receipts WHERE status = 'pending' "
                "AND owner IS NOT NULL ORDER BY owner"
            ).fetchall()
        return [str(row[0]) for row in rows]

    @staticmethod
    def _receipt(conn: sqlite3.Connection, request_id: str) -> Receipt | None:
        row = conn.execute(
            f"SELECT {_RECEIPT_COLUMNS} FROM receipts WHERE request_id = ?", (request_id,)
        ).fetchone()
        return None if row is None else _receipt_row(row)

    # -- lineage ------------------------------------------------------------------------------

    def record_edge(self, **edge: Unpack[NewEdge]) -> LineageEdge:
        child_id = edge["child_id"]
        fingerprint = dump_json(edge["spawn_fingerprint"], what="spawn fingerprint of", of=child_id)
        with self._write("record_edge") as conn:
            if self._edge(conn, child_id) is not None:
                raise edge_exists(child_id)
            try:
                self._cursor.execute(
                    f"INSERT INTO lineage_edges ({_EDGE_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, 'running', ?, NULL, NULL)",
                    (
                        edge["parent_id"],
                        child_id,
                        edge["child_role"],
                        edge["brief_digest"],
                        fingerprint,
                        self._clock(),
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise missing("session", child_id) from exc
            stored = self._edge(conn, child_id)
            assert stored is not None
            return stored

    def complete_edge(
        self, child_id: str, *, status: EdgeStatus, result_summary: str | None = None
    ) -> LineageEdge:
        check_edge_status(status)
        with self._write("complete_edge") as conn:
            cursor = conn.execute(
                "UPDATE lineage_edges SET status = ?, result_summary = ?, completed_at = ? "
                "WHERE child_id = ? AND status = 'running'",
                (status, result_summary, self._clock(), child_id),
            )
            edge = self._edge(conn, child_id)
            if edge is None:
                raise missing("lineage edge", child_id)
            if cursor.rowcount == 0:
                raise edge_ended(edge)
            return edge

    def edges(self, *, parent_id: str | None = None) -> list[LineageEdge]:
        query = f"SELECT {_EDGE_COLUMNS} FROM lineage_edges"
        params: tuple[Any, ...] = ()
        if parent_id is not None:
            query, params = query + " WHERE parent_id = ?", (parent_id,)
        with self._guard("edges") as conn:
            rows = conn.execute(query + " ORDER BY created_at, rowid", params).fetchall()
        return loadable_edges(rows, edge_row)

    @staticmethod
    def _edge(conn: sqlite3.Connection, child_id: str) -> LineageEdge | None:
        row = conn.execute(
            f"SELECT {_EDGE_COLUMNS} FROM lineage_edges WHERE child_id = ?", (child_id,)
        ).fetchone()
        return None if row is None else edge_row(row)


def _receipt_row(row: tuple[Any, ...]) -> Receipt:
    rid, kind, status, result, created_at, completed_at, owner = row
    decoded = None if result is None else load_json(result, what=f"receipt {rid!r}")
    return Receipt(rid, kind, status, decoded, created_at, completed_at, owner)


def _header(row: tuple[Any, ...]) -> SessionHeader:
    session_id, agent, parent_id, depth, status, provider, created_at, request_id, meta, result = (
        row
    )
    return SessionHeader(
        session_id=session_id,
        agent=agent,
        parent_id=parent_id,
        delegation_depth=session_depth(depth, session_id=session_id, stored=True),
        status=status,
        provider=provider,
        created_at=created_at,
        request_id=request_id,
        meta=load_json(meta, what=f"meta of session {session_id!r}"),
        result=None if result is None else load_json(result, what=f"result of {session_id!r}"),
    )


#: The two magic numbers a SQLite write-ahead log starts with (checksums little- or big-endian).
_WAL_MAGIC = (0x377F0682, 0x377F0683)
_WAL_HEADER = 32


def check_wal(path: Path) -> None:
    """Refuse a store whose ``-wal`` file holds frames under a header that is not SQLite's.

    SQLite treats such a log as empty: every commit that lives only there (up to a checkpoint's
    worth) is dropped without a word, and the next write starts the log again over them. A log
    of at most a header's length holds no commit, and is left to SQLite.
    """
    wal = path.with_name(path.name + "-wal")
    try:
        with wal.open("rb") as file:
            head = file.read(_WAL_HEADER)
            size = os.fstat(file.fileno()).st_size
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot read {wal}: {exc}", path=str(path)) from exc
    if size <= _WAL_HEADER or _wal_header_valid(head):
        return
    raise StoreDamaged(
        f"the write-ahead log {wal} of the store {path} is damaged (its header is not "
        "SQLite's): the commits that live only in it cannot be read, and Membrane will not open "
        "the store and write over them. Keep a copy of both files; to open what the database "
        "file itself holds, losing those commits, move the -wal file aside "
        "(docs/durability.md#a-damaged-write-ahead-log)",
        path=str(path),
        problems=[f"{wal}: invalid write-ahead log header"],
    )


def check_file(path: Path) -> list[str]:
    """What is wrong with the existing store file at ``path`` (empty when nothing), read only:
    its write-ahead log's header, that it is Membrane's, and ``PRAGMA quick_check``."""
    try:
        check_wal(path)
    except StoreError as exc:
        return [exc.message]
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return [f"cannot open {path}: {exc}"]
    try:
        app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
        if app_id not in (0, APPLICATION_ID):
            return [f"{path} is not a Membrane store (application_id {app_id})"]
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.Error as exc:
        return [f"{path}: {exc}"]
    finally:
        conn.close()
    return _problems(rows)


def _problems(rows: list[Any]) -> list[str]:
    """The lines of a ``quick_check``'s rows, without its ``ok``."""
    return [line for row in rows for line in str(row[0]).splitlines() if line != "ok"]


def _wal_header_valid(head: bytes) -> bool:
    """Whether ``head`` (a log's first 32 bytes) has SQLite's magic and a matching checksum."""
    if len(head) < _WAL_HEADER:
        return False
    magic = int.from_bytes(head[:4], "big")
    if magic not in _WAL_MAGIC:
        return False
    order: Literal["big", "little"] = "big" if magic & 1 else "little"
    s0 = s1 = 0
    for at in range(0, 24, 8):
        s0 = (s0 + int.from_bytes(head[at : at + 4], order) + s1) & 0xFFFFFFFF
        s1 = (s1 + int.from_bytes(head[at + 4 : at + 8], order) + s0) & 0xFFFFFFFF
    return (s0, s1) == (int.from_bytes(head[24:28], "big"), int.from_bytes(head[28:32], "big"))


def _failed(store: SQLiteStore, action: str, exc: sqlite3.Error) -> StoreError:
    """The ``StoreError`` a failed ``sqlite3`` call inside ``action`` becomes."""
    where = str(store.path)
    return StoreError(f"{action} failed in {where}: {exc}", path=where, action=action)


class _Held:
    """The store's connection under its lock for one call; a ``sqlite3`` error leaving it is
    raised as ``StoreError``. A class, not a generator: a start enters several of them."""

    __slots__ = ("_action", "_store")

    def __init__(self, store: SQLiteStore, action: str) -> None:
        self._store = store
        self._action = action

    def __enter__(self) -> sqlite3.Connection:
        store = self._store
        store._lock.acquire()
        conn = store._conn
        if conn is None:
            store._lock.release()
            where = str(store.path)
            raise StoreError(f"{self._action}: the store {where} is closed", path=where)
        return conn

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._store._lock.release()
        if isinstance(exc, sqlite3.Error):
            raise _failed(self._store, self._action, exc) from exc


class _Joined:
    """A call inside a transaction this thread holds: the lock is already held (from
    ``BEGIN`` to ``COMMIT``), so the call only needs the connection and the translation of
    ``sqlite3`` errors. It keeps no state of its own, so the store reuses one per action."""

    __slots__ = ("_action", "_store")

    def __init__(self, store: SQLiteStore, action: str) -> None:
        self._store = store
        self._action = action

    def __enter__(self) -> sqlite3.Connection:
        conn = self._store._conn
        if conn is None:  # closed by this thread inside its own transaction
            where = str(self._store.path)
            raise StoreError(f"{self._action}: the store {where} is closed", path=where)
        return conn

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None and isinstance(exc, sqlite3.Error):
            raise _failed(self._store, self._action, exc) from exc


class _Enclosed(_Held):
    """A write of its own: ``BEGIN IMMEDIATE`` ... ``COMMIT`` at the top level (counted by the
    flusher once committed), a savepoint inside a transaction, or bare there for an
    ``atomic`` write. Whatever fails is rolled back, to the savepoint when nested."""

    __slots__ = ("_atomic", "_conn", "_level")

    def __init__(self, store: SQLiteStore, action: str, *, atomic: bool) -> None:
        super().__init__(store, action)
        self._atomic = atomic
        self._level = -1
        self._conn: sqlite3.Connection | None = None

    def __enter__(self) -> sqlite3.Connection:
        conn = self._conn = _Held.__enter__(self)
        store = self._store
        level = store._nesting
        if level and self._atomic:
            return conn  # bare: SQLite undoes a failed statement by itself
        try:
            if level == 0:
                store._cursor.execute("BEGIN IMMEDIATE")
            else:
                conn.execute(f"SAVEPOINT sp{level}")
        except BaseException as error:
            _Held.__exit__(self, type(error), error, error.__traceback__)
            raise
        self._level = level
        store._nesting = level + 1
        return conn

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        level = self._level
        if level >= 0:
            store = self._store
            store._nesting = level
            conn = self._conn
            assert conn is not None  # set by ``__enter__``
            try:
                if exc is not None:
                    if level == 0:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                    else:
                        conn.execute(f"ROLLBACK TO sp{level}")
                        conn.execute(f"RELEASE sp{level}")
                elif level == 0:
                    try:
                        store._cursor.execute("COMMIT")
                    except sqlite3.Error:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        raise
                    if store._flusher is not None:
                        store._flusher.written()
                else:
                    conn.execute(f"RELEASE sp{level}")
            except BaseException as error:
                _Held.__exit__(self, type(error), error, error.__traceback__)
                raise
        _Held.__exit__(self, kind, exc, tb)


class _Transaction(_Enclosed):
    """``SQLiteStore.transaction()``: an ``_Enclosed`` write that gives no connection out."""

    __slots__ = ()

    def __init__(self, store: SQLiteStore) -> None:
        super().__init__(store, "transaction", atomic=False)

    def __enter__(self) -> None:  # type: ignore[override]
        _Enclosed.__enter__(self)


def _open_read_only(
    path: Path, timeout: float, migrations: tuple[Migration, ...]
) -> sqlite3.Connection:
    """A connection that can neither write ``path`` nor make a file beside it (``read_only``).

    With no ``-wal`` beside the file no connection is writing it (a WAL writer keeps one while
    it is open, and the last to close checkpoints and removes it), so it is opened
    ``immutable``: no lock, no ``-shm``/``-wal`` made, which also reads a file on a read-only
    folder or a full disk. Otherwise it is opened ``mode=ro`` and reads beside the writer
    through the files the writer keeps. The schema must be this Membrane's own: an older one
    needs a writing command to migrate it first."""
    where = str(path)
    if not path.is_file():
        raise StoreError(f"no Membrane store at {where}", path=where)
    check_wal(path)
    mode = "mode=ro" if Path(f"{where}-wal").exists() else "immutable=1"
    try:
        conn = sqlite3.connect(
            f"{path.absolute().as_uri()}?{mode}",
            uri=True,
            timeout=timeout,
            isolation_level=None,
            check_same_thread=False,
        )
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {where} as a Membrane store: {exc}", path=where) from exc
    try:
        check_identity(conn, where)
        row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
    except sqlite3.DatabaseError as exc:
        conn.close()
        if "not a database" in str(exc):
            raise StoreNotMembrane(
                f"{where} is not a SQLite database, so not a Membrane store ({exc})", path=where
            ) from exc
        raise StoreError(
            f"cannot read {where} as a Membrane store: {exc} "
            "(is it a SQLite database written by Membrane?)",
            path=where,
        ) from exc
    except BaseException:
        conn.close()
        raise
    known = migrations[-1].version if migrations else 0
    if int(row[0]) != known:
        conn.close()
        newer = int(row[0]) > known
        raise StoreError(
            f"{where} has schema version {row[0]}, "
            + (
                f"newer than this Membrane knows ({known}); upgrade Membrane to open it"
                if newer
                else f"older than this Membrane's ({known}); a writing command "
                "(membrane run, resume) migrates it"
            ),
            path=where,
            version=int(row[0]),
            known=known,
        )
    return conn
