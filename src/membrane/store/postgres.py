"""``PostgresStore``: the ``Store`` protocol on PostgreSQL, for several nodes on one database.

The thread that opened the store (the event loop's) keeps one connection of its own; every
other thread borrows from a ``psycopg_pool.ConnectionPool`` (psycopg 3, autocommit). A call made
outside a transaction runs on the thread's connection (a method of several statements runs
them in one ``BEGIN``/``COMMIT``); ``transaction()`` binds one connection to the calling
thread from its ``BEGIN`` to its ``COMMIT``, so every call the thread makes meanwhile joins it,
and a nested block is a savepoint. Each guarantee of docs/durability.md holds by the
database's own means: receipts by their unique key (``ON CONFLICT DO NOTHING``), the outbox
read with ``FOR UPDATE SKIP LOCKED``, a budget charge with its ledger row locked (``FOR
UPDATE``) until it commits, a lease claimed by one upsert that raises its generation when
another owner takes it, and ``fence`` holding the lease row (``FOR SHARE``) under the writes it
guards.

The URL's password never leaves this module: the store names its database by the URL with the
password masked (``shown``), and every error is raised with that text in place of the secret.

Every ``psycopg`` error is translated at this boundary into ``StoreError``. The outbox, leases,
workflow state and schedules are in ``postgres_queue`` (a mixin on the same plumbing).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Unpack

from membrane.config.values import Retention
from membrane.errors import StoreError
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
from membrane.store.migrations import Migration
from membrane.store.postgres_prune import prune as prune_rows
from membrane.store.postgres_queue import PostgresQueue, edge_row
from membrane.store.postgres_schema import PG_MIGRATIONS, migrate
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
from membrane.store.urls import is_postgres_url, redact_url

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["PostgresStore"]

_SESSION_COLUMNS = (
    "session_id, agent, parent_id, delegation_depth, status, provider, created_at, request_id, "
    "meta, result"
)
_RECEIPT_COLUMNS = "request_id, kind, status, result, created_at, completed_at, owner"
_EDGE_COLUMNS = (
    "parent_id, child_id, child_role, brief_digest, spawn_fingerprint, status, created_at, "
    "result_summary, completed_at"
)


class PostgresStore(PostgresQueue, Store):
    """A ``Store`` in a PostgreSQL database named by ``url`` (``postgresql://...``).

    ``clock`` stamps rows (seconds since the epoch), as ``SQLiteStore``'s does; leases compare
    against it, so the nodes sharing a database keep their clocks in step (NTP). ``max_size``
    bounds the pool's connections. ``timeout`` is how long a call waits for a connection.
    ``migrations`` exists for upgrade tests. Commits are durable when they return (the
    server's ``synchronous_commit``), so ``barrier()`` returns at once.
    """

    remote = True

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], float] = time.time,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 30.0,
        migrations: tuple[Migration, ...] = PG_MIGRATIONS,
    ) -> None:
        self._clock = clock
        self.shown = redact_url(url)
        self._secret: str | None = None
        if not is_postgres_url(url):
            raise StoreError(
                f"{self.shown!r} is not a PostgreSQL URL (postgresql://USER@HOST/DB)",
                url=self.shown,
            )
        self._local = threading.local()
        import psycopg
        import psycopg_pool

        self._errors: tuple[type[BaseException], ...] = (psycopg.Error, psycopg_pool.PoolTimeout)
        try:
            self._secret = str(psycopg.conninfo.conninfo_to_dict(url).get("password") or "") or None
        except psycopg.Error:
            raise StoreError(
                f"{self.shown} is not a PostgreSQL URL libpq can read", url=self.shown
            ) from None
        try:
            home = psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout)))
        except self._errors as exc:
            raise self._failed("open", exc) from None
        try:
            self.schema_version = migrate(home, where=self.shown, migrations=migrations)
        except BaseException as exc:
            home.close()
            if isinstance(exc, self._errors):
                raise self._failed("open", exc) from None
            raise
        #: The thread that opened the store (the event loop's, as a rule) keeps the connection
        #: it migrated with: a borrow from the pool per call would cost more than the call.
        #: Other threads (workers) borrow from the pool.
        self._home: psycopg.Connection[tuple[Any, ...]] | None = home
        self._home_thread = threading.get_ident()
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[tuple[Any, ...]]] | None = (
            psycopg_pool.ConnectionPool(
                url,
                min_size=min_size,
                max_size=max_size,
                kwargs={"autocommit": True},
                timeout=timeout,
                open=False,
                name="membrane-store",
            )
        )
        try:
            self._pool.open(wait=False)
        except self._errors as exc:
            raise self._failed("open", exc) from None

    # -- plumbing -----------------------------------------------------------------------------

    def _failed(self, action: str, exc: BaseException) -> StoreError:
        """The ``StoreError`` a driver error inside ``action`` becomes, the password masked."""
        text = str(exc).strip() or type(exc).__name__
        if self._secret:
            text = text.replace(self._secret, "***")
        return StoreError(f"{action} failed in {self.shown}: {text}", url=self.shown, action=action)

    def _bound(self) -> psycopg.Connection[tuple[Any, ...]] | None:
        conn: psycopg.Connection[tuple[Any, ...]] | None = getattr(self._local, "conn", None)
        return conn

    @contextmanager
    def _use(self, action: str, *, block: bool = False) -> Iterator[psycopg.Cursor[Any]]:
        """A cursor for one call: inside this thread's transaction when one is open (in a
        savepoint when ``block``: a call of several statements, or one a constraint may
        refuse, undoes only itself), else on a borrowed connection (in one ``BEGIN``/``COMMIT``
        when ``block``)."""
        conn = self._bound()
        try:
            if conn is not None:
                if block:
                    with conn.transaction(), conn.cursor() as cur:
                        yield cur
                else:
                    with conn.cursor() as cur:
                        yield cur
                return
            with self._borrowed(action) as own:
                if block:
                    with own.transaction(), own.cursor() as cur:
                        yield cur
                else:
                    with own.cursor() as cur:
                        yield cur
        except StoreError:
            raise
        except self._errors as exc:
            raise self._failed(action, exc) from None

    @contextmanager
    def _borrowed(self, action: str) -> Iterator[psycopg.Connection[Any]]:
        """A connection of this thread's own for a while: the home connection on the thread
        that opened the store, one from the pool on any other."""
        pool, home = self._pool, self._home
        if pool is None or home is None:
            raise StoreError(f"{action}: the store {self.shown} is closed", url=self.shown)
        if threading.get_ident() == self._home_thread:
            yield home
            return
        with pool.connection() as own:
            yield own

    def transaction(self) -> AbstractContextManager[None]:
        return self._transaction()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        conn = self._bound()
        if conn is not None:
            try:
                with conn.transaction():
                    yield
            except self._errors as exc:
                raise self._failed("transaction", exc) from None
            return
        try:
            with self._borrowed("transaction") as own:
                self._local.conn = own
                try:
                    with own.transaction():
                        yield
                finally:
                    self._local.conn = None
        except self._errors as exc:
            raise self._failed("transaction", exc) from None

    def prune(self, retention: Retention, *, now: float | None = None) -> PruneReport:
        """Delete the finished runs ``retention`` lets go of, as ``SQLiteStore.prune`` does
        (``membrane.store.postgres_prune``), in one transaction; the space is left to
        PostgreSQL's autovacuum (``freed_bytes`` 0). ``now``: the clock's time by default."""
        if not isinstance(retention, Retention):
            raise StoreError("prune takes the settings' Retention", got=type(retention).__name__)
        now = self._clock() if now is None else now
        day = 86_400.0
        before = {status: now - days * day for status, days in retention.runs_days.items()}
        dead = (
            None if retention.dead_letters_days is None else now - retention.dead_letters_days * day
        )
        with self._use("prune", block=True) as cur:
            counts = prune_rows(
                cur, before=before, keep=retention.keep_runs, dead_before=dead,
                lineage=retention.lineage,
            )  # fmt: skip
        return PruneReport(**counts)

    async def barrier(self) -> None:
        """Commits are durable when ``COMMIT`` returns (``synchronous_commit``)."""

    def close(self) -> None:
        """Close the home connection and every pooled one (idempotent)."""
        pool, self._pool = self._pool, None
        home, self._home = self._home, None
        if pool is not None:
            pool.close()
        if home is not None:
            home.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self.shown!r})"

    # -- sessions and events ------------------------------------------------------------------

    def create_session(self, header: SessionHeader) -> None:
        depth = session_depth(header.delegation_depth, session_id=header.session_id, stored=False)
        meta = dump_json(header.meta, what="meta of session", of=header.session_id)
        result = dump_json(header.result, what="result of session", of=header.session_id)
        now = self._clock()
        with self._use("create_session") as cur:
            cur.execute(
                f"INSERT INTO sessions ({_SESSION_COLUMNS}, updated_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (session_id) DO NOTHING",
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
            if cur.rowcount == 0:
                raise StoreError(
                    f"session {header.session_id!r} already exists; session ids are unique",
                    session_id=header.session_id,
                )

    def get_header(self, session_id: str) -> SessionHeader | None:
        with self._use("get_header") as cur:
            row = cur.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE session_id = %s", (session_id,)
            ).fetchone()
        return None if row is None else _header(row)

    def set_status(self, session_id: str, status: str, *, result: JSONObject | None = None) -> None:
        encoded = dump_json(result, what="result of session", of=session_id)
        with self._use("set_status") as cur:
            cur.execute(
                "UPDATE sessions SET status = %s, result = COALESCE(%s, result), updated_at = %s "
                "WHERE session_id = %s",
                (status, encoded, self._clock(), session_id),
            )
            if cur.rowcount == 0:
                raise missing("session", session_id)

    def list_sessions(self, *, parent_id: str | None = None) -> list[SessionHeader]:
        query = f"SELECT {_SESSION_COLUMNS} FROM sessions"
        params: tuple[Any, ...] = ()
        if parent_id is not None:
            query, params = query + " WHERE parent_id = %s", (parent_id,)
        with self._use("list_sessions") as cur:
            rows = cur.execute(query + " ORDER BY created_at, ord", params).fetchall()
        return [_header(row) for row in rows]

    def page_sessions(
        self,
        *,
        limit: int,
        after: str | None = None,
        parent_id: str | None = None,
        meta: tuple[str, str] | None = None,
    ) -> list[SessionHeader]:
        where, params = ["TRUE"], []
        if after is not None:
            where.append("ord > (SELECT ord FROM sessions WHERE session_id = %s)")
            params.append(after)
        if parent_id is not None:
            where.append("parent_id = %s")
            params.append(parent_id)
        if meta is not None:
            where.append("(meta::jsonb ->> %s) = %s")
            params += [meta[0], meta[1]]
        query = (
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE {' AND '.join(where)} "
            "ORDER BY ord LIMIT %s"
        )
        with self._use("page_sessions") as cur:
            if (
                after is not None
                and cur.execute("SELECT 1 FROM sessions WHERE session_id = %s", (after,)).fetchone()
                is None
            ):
                raise missing("session", after)
            rows = cur.execute(query, (*params, max(0, limit))).fetchall()
        return [_header(row) for row in rows]

    def append_event(self, session_id: str, kind: str, data: JSONObject) -> int:
        encoded = dump_json(data, what="data of event", of=kind)
        with self._use("append_event") as cur:
            row = cur.execute(
                "INSERT INTO events (session_id, kind, data, at) "
                "SELECT session_id, %s, %s, %s FROM sessions WHERE session_id = %s RETURNING seq",
                (kind, encoded, self._clock(), session_id),
            ).fetchone()
        if row is None:
            raise missing("session", session_id)
        return int(row[0])

    def events(self, *, session_id: str | None = None, after: int = 0) -> list[StoredEvent]:
        query = "SELECT seq, session_id, kind, data, at FROM events WHERE seq > %s"
        params: tuple[Any, ...] = (after,)
        if session_id is not None:
            query, params = query + " AND session_id = %s", (after, session_id)
        with self._use("events") as cur:
            rows = cur.execute(query + " ORDER BY seq", params).fetchall()
        return [
            StoredEvent(int(seq), sid, kind, load_json(data, what=f"event {seq}"), at)
            for seq, sid, kind, data, at in rows
        ]

    def update_meta(self, session_id: str, values: JSONObject) -> None:
        dump_json(values, what=f"meta update of session {session_id!r}")
        with self._use("update_meta", block=True) as cur:
            row = cur.execute(
                "SELECT meta FROM sessions WHERE session_id = %s FOR UPDATE", (session_id,)
            ).fetchone()
            if row is None:
                raise missing("session", session_id)
            meta = load_json(row[0], what=f"meta of session {session_id!r}")
            meta.update(values)
            cur.execute(
                "UPDATE sessions SET meta = %s, updated_at = %s WHERE session_id = %s",
                (
                    dump_json(meta, what=f"meta of session {session_id!r}"),
                    self._clock(),
                    session_id,
                ),
            )

    # -- budget ledgers -----------------------------------------------------------------------

    def lock_ledger(self, owner: str) -> JSONDict | None:
        with self._use("lock_ledger") as cur:
            row = cur.execute(
                "SELECT meta FROM sessions WHERE session_id = %s FOR UPDATE", (owner,)
            ).fetchone()
        if row is None:
            return None
        return ledger_of(load_json(row[0], what=f"meta of session {owner!r}"))

    def write_ledger(self, owner: str, ledger: JSONObject) -> None:
        with self._use("write_ledger", block=True) as cur:
            row = cur.execute(
                "SELECT meta FROM sessions WHERE session_id = %s FOR UPDATE", (owner,)
            ).fetchone()
            if row is None:
                return
            meta = load_json(row[0], what=f"meta of session {owner!r}")
            meta[BUDGET_KEY] = ledger
            cur.execute(
                "UPDATE sessions SET meta = %s, updated_at = %s WHERE session_id = %s",
                (dump_json(meta, what=f"meta of session {owner!r}"), self._clock(), owner),
            )

    # -- transcripts --------------------------------------------------------------------------

    def append_messages(
        self, session_id: str, messages: Sequence[JSONObject], *, start: int
    ) -> int:
        encoded = dump_messages(messages, session_id=session_id, start=start)
        if type(start) is not int or start < 0 or not encoded:
            check_start(start, session_id=session_id, length=self.transcript_length(session_id))
            return start
        with self._use("append_messages", block=True) as cur:
            # One statement: the rows go in only where the stored transcript ends at ``start``
            # (and the primary key refuses a second writer racing for the same positions).
            cur.execute(
                "INSERT INTO messages (session_id, idx, data) "
                "SELECT %s, %s + ordinality - 1, data FROM unnest(%s::text[]) "
                "WITH ORDINALITY AS t(data, ordinality) "
                "WHERE EXISTS (SELECT 1 FROM sessions WHERE session_id = %s) "
                "AND COALESCE((SELECT MAX(idx) FROM messages WHERE session_id = %s) + 1, 0) = %s",
                (session_id, start, encoded, session_id, session_id, start),
            )
            added = cur.rowcount
            if added != len(encoded):
                length = self._transcript_length(cur, session_id)
                check_start(start, session_id=session_id, length=length)
                raise StoreError(
                    f"the messages of session {session_id!r} could not be appended at {start}",
                    session_id=session_id,
                )
        return start + len(encoded)

    def transcript(self, session_id: str) -> list[JSONDict]:
        with self._use("transcript") as cur:
            if (
                cur.execute(
                    "SELECT 1 FROM sessions WHERE session_id = %s", (session_id,)
                ).fetchone()
                is None
            ):
                raise missing("session", session_id)
            rows = cur.execute(
                "SELECT idx, data FROM messages WHERE session_id = %s ORDER BY idx", (session_id,)
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
        with self._use("transcript_length") as cur:
            return self._transcript_length(cur, session_id)

    @staticmethod
    def _transcript_length(cur: psycopg.Cursor[Any], session_id: str) -> int:
        row = cur.execute(
            "SELECT EXISTS (SELECT 1 FROM sessions WHERE session_id = %s), "
            "(SELECT MAX(idx) FROM messages WHERE session_id = %s)",
            (session_id, session_id),
        ).fetchone()
        assert row is not None
        if not row[0]:
            raise missing("session", session_id)
        return 0 if row[1] is None else int(row[1]) + 1

    # -- receipts -----------------------------------------------------------------------------

    def begin_receipt(
        self, request_id: str, *, kind: str, owner: str | None = None
    ) -> Receipt | None:
        with self._use("begin_receipt") as cur:
            cur.execute(
                "INSERT INTO receipts (request_id, kind, status, created_at, owner) "
                "VALUES (%s, %s, 'pending', %s, %s) ON CONFLICT (request_id) DO NOTHING",
                (request_id, kind, self._clock(), owner),
            )
            if cur.rowcount == 1:
                return None
            existing = _receipt(cur, request_id)
        if existing is None:  # released between the conflict and the read: try again
            return self.begin_receipt(request_id, kind=kind, owner=owner)
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
        with self._use("complete_receipt") as cur:
            row = cur.execute(
                "UPDATE receipts SET status = 'completed', result = %s, completed_at = %s "
                f"WHERE request_id = %s AND status = 'pending' RETURNING {_RECEIPT_COLUMNS}",
                (encoded, self._clock(), request_id),
            ).fetchone()
            if row is not None:
                return _receipt_row(row)
            if _receipt(cur, request_id) is None:
                raise missing("receipt", request_id)
        raise StoreError(
            f"receipt {request_id!r} is already completed; replay its result instead",
            request_id=request_id,
        )

    def get_receipt(self, request_id: str) -> Receipt | None:
        with self._use("get_receipt") as cur:
            return _receipt(cur, request_id)

    def release_receipt(self, request_id: str, *, owner: str | None = None) -> None:
        held = "" if owner is None else " AND owner = %s"
        with self._use("release_receipt") as cur:
            cur.execute(
                f"DELETE FROM receipts WHERE request_id = %s AND status = 'pending'{held}",
                (request_id,) if owner is None else (request_id, owner),
            )
            if cur.rowcount > 0 or owner is not None:
                return
            if _receipt(cur, request_id) is not None:
                raise StoreError(
                    f"receipt {request_id!r} is completed, so it cannot be released; replay "
                    "its result instead",
                    request_id=request_id,
                )

    def reap_pending_receipts(
        self, *, older_than: float, owners: Collection[str] = (), spare: Collection[str] = ()
    ) -> list[str]:
        with self._use("reap_pending_receipts") as cur:
            rows = cur.execute(
                "DELETE FROM receipts WHERE status = 'pending' AND ("
                "(created_at < %s AND (owner IS NULL OR NOT owner = ANY(%s))) "
                "OR owner = ANY(%s)) RETURNING request_id",
                (older_than, sorted(set(spare)), sorted(set(owners))),
            ).fetchall()
        return sorted(str(row[0]) for row in rows)

    def pending_receipt_owners(self) -> list[str]:
        with self._use("pending_receipt_owners") as cur:
            rows = cur.execute(
                "SELECT DISTINCT owner FROM receipts WHERE status = 'pending' "
                "AND owner IS NOT NULL ORDER BY owner"
            ).fetchall()
        return [str(row[0]) for row in rows]

    # -- lineage ------------------------------------------------------------------------------

    def record_edge(self, **edge: Unpack[NewEdge]) -> LineageEdge:
        child_id = edge["child_id"]
        fingerprint = dump_json(edge["spawn_fingerprint"], what="spawn fingerprint of", of=child_id)
        with self._use("record_edge") as cur:
            row = cur.execute(
                f"INSERT INTO lineage_edges ({_EDGE_COLUMNS}) "
                "SELECT %s, session_id, %s, %s, %s, 'running', %s, NULL, NULL FROM sessions "
                "WHERE session_id = %s ON CONFLICT (child_id) DO NOTHING "
                f"RETURNING {_EDGE_COLUMNS}",
                (
                    edge["parent_id"],
                    edge["child_role"],
                    edge["brief_digest"],
                    fingerprint,
                    self._clock(),
                    child_id,
                ),
            ).fetchone()
            if row is not None:
                return edge_row(row)
            if _edge(cur, child_id) is not None:
                raise edge_exists(child_id)
        raise missing("session", child_id)

    def complete_edge(
        self, child_id: str, *, status: EdgeStatus, result_summary: str | None = None
    ) -> LineageEdge:
        check_edge_status(status)
        with self._use("complete_edge") as cur:
            row = cur.execute(
                "UPDATE lineage_edges SET status = %s, result_summary = %s, completed_at = %s "
                f"WHERE child_id = %s AND status = 'running' RETURNING {_EDGE_COLUMNS}",
                (status, result_summary, self._clock(), child_id),
            ).fetchone()
            if row is not None:
                return edge_row(row)
            found = _edge(cur, child_id)
        if found is None:
            raise missing("lineage edge", child_id)
        raise edge_ended(found)

    def edges(self, *, parent_id: str | None = None) -> list[LineageEdge]:
        query = f"SELECT {_EDGE_COLUMNS} FROM lineage_edges"
        params: tuple[Any, ...] = ()
        if parent_id is not None:
            query, params = query + " WHERE parent_id = %s", (parent_id,)
        with self._use("edges") as cur:
            rows = cur.execute(query + " ORDER BY created_at, ord", params).fetchall()
        return loadable_edges(rows, edge_row)


def _receipt(cur: psycopg.Cursor[Any], request_id: str) -> Receipt | None:
    row = cur.execute(
        f"SELECT {_RECEIPT_COLUMNS} FROM receipts WHERE request_id = %s", (request_id,)
    ).fetchone()
    return None if row is None else _receipt_row(row)


def _receipt_row(row: Sequence[Any]) -> Receipt:
    rid, kind, status, result, created_at, completed_at, owner = row
    decoded = None if result is None else load_json(result, what=f"receipt {rid!r}")
    return Receipt(rid, kind, status, decoded, created_at, completed_at, owner)


def _edge(cur: psycopg.Cursor[Any], child_id: str) -> LineageEdge | None:
    row = cur.execute(
        f"SELECT {_EDGE_COLUMNS} FROM lineage_edges WHERE child_id = %s", (child_id,)
    ).fetchone()
    return None if row is None else edge_row(row)


def _header(row: Sequence[Any]) -> SessionHeader:
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
