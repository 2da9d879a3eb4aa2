"""Ordered schema migrations for ``SQLiteStore``.

Each migration has a version (1, 2, ... without gaps), a name and its statements. ``migrate``
applies the missing ones in order inside one ``BEGIN IMMEDIATE`` transaction, so two processes
opening a fresh file at once cannot both migrate it, and a failure leaves the old schema intact.
Applied migrations are recorded in ``schema_migrations``; reopening applies nothing.

The file knows it is Membrane's: ``migrate`` sets SQLite's ``application_id`` to
``APPLICATION_ID`` and ``user_version`` to the schema version in the transaction that migrates,
and checks both first. A file of another application (another ``application_id``, or tables
without a Membrane schema) is refused (``store-not-membrane``) and one whose ids disagree with
its schema (a Membrane id and no schema: the schema lived in a write-ahead log that was lost)
is refused (``store-damaged``): no new schema is ever laid over a file that is not empty. A
store written before the ids existed (no ``application_id``, a ``schema_migrations`` table) is
adopted.

Never edit a released migration: append a new one.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from membrane.errors import StoreDamaged, StoreError, StoreNotMembrane

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "Migration",
    "check_identity",
    "migrate",
    "schema_version",
]

#: SQLite's ``application_id`` of every Membrane store: the bytes ``MbrN``.
APPLICATION_ID = 0x4D62724E


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "sessions and events",
        (
            # delegation_depth is declared without a type on purpose: with no column affinity,
            # SQLite returns exactly what was written, so a corrupt value ('3', 2.0, -1, NULL)
            # is seen for what it is on read instead of being silently coerced.
            """CREATE TABLE sessions (
                session_id       TEXT PRIMARY KEY NOT NULL,
                agent            TEXT NOT NULL,
                parent_id        TEXT,
                delegation_depth,
                status           TEXT NOT NULL,
                provider         TEXT NOT NULL,
                created_at       REAL NOT NULL,
                updated_at       REAL NOT NULL,
                request_id       TEXT,
                meta             TEXT NOT NULL,
                result           TEXT
            )""",
            "CREATE INDEX sessions_by_parent ON sessions (parent_id, created_at)",
            """CREATE TABLE events (
                seq        INTEGER PRIMARY KEY AUTOINCREMENT,
                session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
                kind       TEXT NOT NULL,
                data       TEXT NOT NULL,
                at         REAL NOT NULL
            )""",
            "CREATE INDEX events_by_session ON events (session_id, seq)",
        ),
    ),
    Migration(
        2,
        "receipts, outbox and lineage",
        (
            """CREATE TABLE receipts (
                request_id   TEXT PRIMARY KEY NOT NULL,
                kind         TEXT NOT NULL,
                status       TEXT NOT NULL CHECK (status IN ('pending', 'completed')),
                result       TEXT,
                created_at   REAL NOT NULL,
                completed_at REAL
            )""",
            "CREATE INDEX receipts_pending ON receipts (created_at) WHERE status = 'pending'",
            # recipient has no foreign key: a delivery may be owed to a host-level session
            # that the store never held, and it must outlive the recipient's own rows.
            """CREATE TABLE outbox (
                id              INTEGER PRIMARY KEY AUTOINCREMENT,
                recipient       TEXT NOT NULL,
                payload         TEXT NOT NULL,
                attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
                next_attempt_at REAL NOT NULL,
                created_at      REAL NOT NULL,
                delivered_at    REAL
            )""",
            "CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE delivered_at IS NULL",
            """CREATE TABLE lineage_edges (
                child_id          TEXT PRIMARY KEY NOT NULL
                                  REFERENCES sessions (session_id) ON DELETE CASCADE,
                parent_id         TEXT NOT NULL,
                child_role        TEXT NOT NULL,
                brief_digest      TEXT NOT NULL,
                spawn_fingerprint TEXT NOT NULL,
                status            TEXT NOT NULL
                                  CHECK (status IN ('running', 'completed', 'failed')),
                result_summary    TEXT,
                created_at        REAL NOT NULL,
                completed_at      REAL
            )""",
            "CREATE INDEX lineage_by_parent ON lineage_edges (parent_id, created_at)",
        ),
    ),
    Migration(
        3,
        "transcripts",
        (
            # One row per conversation message, appended as a run goes (a resume reads them
            # back in idx order); the primary key makes a duplicate position impossible.
            """CREATE TABLE messages (
                session_id TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
                idx        INTEGER NOT NULL CHECK (idx >= 0),
                data       TEXT NOT NULL,
                PRIMARY KEY (session_id, idx)
            ) WITHOUT ROWID""",
        ),
    ),
    Migration(
        4,
        "schedules",
        (
            """CREATE TABLE schedules (
                schedule_id TEXT PRIMARY KEY NOT NULL,
                record      TEXT NOT NULL,
                updated_at  REAL NOT NULL
            )""",
        ),
    ),
    Migration(
        5,
        "dead letters, leases, workflow state, interrupted edges",
        (
            "ALTER TABLE outbox ADD COLUMN last_error TEXT",
            # A dead letter leaves the outbox (so no due or pending query sees it) and keeps
            # its id, which is its delivery id: a revived item is deduplicated as before.
            """CREATE TABLE outbox_dead (
                id          INTEGER PRIMARY KEY NOT NULL,
                recipient   TEXT NOT NULL,
                payload     TEXT NOT NULL,
                attempts    INTEGER NOT NULL,
                created_at  REAL NOT NULL,
                last_error  TEXT NOT NULL,
                dead_at     REAL NOT NULL
            )""",
            """CREATE TABLE run_leases (
                run_id      TEXT PRIMARY KEY NOT NULL,
                owner       TEXT NOT NULL,
                expires_at  REAL NOT NULL,
                acquired_at REAL NOT NULL
            )""",
            "CREATE INDEX run_leases_expiry ON run_leases (expires_at)",
            """CREATE TABLE workflow_state (
                run_id     TEXT PRIMARY KEY NOT NULL
                           REFERENCES sessions (session_id) ON DELETE CASCADE,
                workflow   TEXT NOT NULL,
                state      TEXT NOT NULL,
                version    INTEGER NOT NULL CHECK (version >= 1),
                updated_at REAL NOT NULL
            )""",
            # SQLite cannot change a CHECK constraint in place: the ledger is rebuilt.
            """CREATE TABLE lineage_edges_v4 (
                child_id          TEXT PRIMARY KEY NOT NULL
                                  REFERENCES sessions (session_id) ON DELETE CASCADE,
                parent_id         TEXT NOT NULL,
                child_role        TEXT NOT NULL,
                brief_digest      TEXT NOT NULL,
                spawn_fingerprint TEXT NOT NULL,
                status            TEXT NOT NULL CHECK
                                  (status IN ('running', 'completed', 'failed', 'interrupted')),
                result_summary    TEXT,
                created_at        REAL NOT NULL,
                completed_at      REAL
            )""",
            "INSERT INTO lineage_edges_v4 SELECT child_id, parent_id, child_role, brief_digest, "
            "spawn_fingerprint, status, result_summary, created_at, completed_at "
            "FROM lineage_edges",
            "DROP TABLE lineage_edges",
            "ALTER TABLE lineage_edges_v4 RENAME TO lineage_edges",
            "CREATE INDEX lineage_by_parent ON lineage_edges (parent_id, created_at)",
        ),
    ),
    Migration(
        6,
        "receipt owners",
        (
            # The process that wrote a pending receipt (host, pid, boot and start time), so a
            # successor clears a dead owner's receipt at once and a live one's never.
            "ALTER TABLE receipts ADD COLUMN owner TEXT",
        ),
    ),
    Migration(
        7,
        "wrapped_up replaces steered",
        (
            # A run that answered during its grace turns was stored as ``steered``, a word that
            # promised a host's steer; it is ``wrapped_up`` now, in the row and in its result.
            """UPDATE sessions SET status = 'wrapped_up',
                result = CASE
                    WHEN json_valid(result) AND json_extract(result, '$.status') = 'steered'
                    THEN json_set(result, '$.status', 'wrapped_up') ELSE result END
               WHERE status = 'steered'""",
        ),
    ),
    Migration(
        8,
        "lease generations",
        (
            # Rises each time another owner takes a lease, so a stale holder's write that
            # names its generation is refused (``fence``).
            "ALTER TABLE run_leases ADD COLUMN generation INTEGER NOT NULL DEFAULT 1",
        ),
    ),
)


def schema_version(conn: sqlite3.Connection) -> int:
    """The highest applied version, 0 for a fresh file."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
    return int(row[0])


def migrate(
    conn: sqlite3.Connection, *, path: str, migrations: tuple[Migration, ...] = MIGRATIONS
) -> int:
    """Bring the schema up to the last of ``migrations``; return the resulting version.

    ``conn`` must be in autocommit mode (``isolation_level=None``). A file whose schema is
    newer than this code knows is refused rather than misread.
    """
    _check_sequence(migrations)
    known = migrations[-1].version if migrations else 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        check_identity(conn, path)
        current = schema_version(conn)
        if current > known:
            raise StoreError(
                f"{path} has schema version {current}, newer than this Membrane knows ({known}); "
                "upgrade Membrane to open it",
                path=path,
                version=current,
                known=known,
            )
        for migration in migrations:
            if migration.version <= current:
                continue
            for statement in migration.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, time.time()),
            )
            current = migration.version
        # Written only when they change: opening a store that is up to date writes nothing.
        # PRAGMA takes no parameters; both values are integers this code chose.
        if int(conn.execute("PRAGMA application_id").fetchone()[0]) != APPLICATION_ID:
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID:d}")
        if int(conn.execute("PRAGMA user_version").fetchone()[0]) != current:
            conn.execute(f"PRAGMA user_version = {current:d}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return current


def check_identity(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a file that is not a Membrane store, or one whose ids disagree with its schema."""
    app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    user_version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    tables = {
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    }
    if app_id not in (0, APPLICATION_ID) or (
        app_id == 0 and tables and "schema_migrations" not in tables
    ):
        raise StoreNotMembrane(
            f"{path} is a SQLite database of another application (application_id {app_id}, "
            f"tables: {', '.join(sorted(tables)) or 'none'}), not a Membrane store; "
            "Membrane will not write to it: point the state at another file",
            path=path,
            application_id=app_id,
        )
    if app_id != APPLICATION_ID:
        return  # a new file, or a store written before the ids were set: adopted
    recorded: int | str = (
        int(conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0])
        if "schema_migrations" in tables
        else "none"
    )
    if recorded != user_version:
        raise StoreDamaged(
            f"{path} is a Membrane store whose schema is missing or disagrees with its recorded "
            f"version (user_version {user_version}, schema version {recorded}): part of it was "
            "lost (a damaged or deleted write-ahead log?); Membrane will not write over it. "
            "Restore it from a copy, or move it aside to start a new store",
            path=path,
            problems=[f"user_version {user_version}, schema version {recorded}"],
        )


def _check_sequence(migrations: tuple[Migration, ...]) -> None:
    for expected, migration in enumerate(migrations, start=1):
        if migration.version != expected:
            raise StoreError(
                f"migration {migration.name!r} has version {migration.version}, "
                f"expected {expected}: versions must be 1, 2, ... in order",
                version=migration.version,
            )
