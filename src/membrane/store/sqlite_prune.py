"""Retention for the SQLite store: deleting finished runs with everything kept for them.

``prune`` runs in one write transaction of the store's connection. It chooses the finished
sessions (``FINISHED_STATES``) that ended before their status's cutoff, or that more than
``keep`` finished sessions ended after, then spares every one still referenced:

* a session whose parent has not finished (the parent may still wait for it or list it);
* a session with an unfinished child (the child's parent must stay);
* a session an undelivered notice is owed to, or whose own completion notice is undelivered;
* a session holding a lease (a driver may still be finishing it).

What it deletes for each chosen session: its events, its transcript, its delivered outbox
rows (to it or about it), its dead letters, the completed receipt of the start that made it,
its workflow state and its lineage edge, and then the session itself; or, with
``lineage="summary"``, everything but its header (its ``meta`` cut to a mark) and its lineage
edge, so the ledger still says who started whom and how each ended. Dead letters older than
``dead_before`` go too.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

from membrane.vocabulary import FINISHED_STATES

__all__ = ["prune"]

_FINISHED = tuple(sorted(FINISHED_STATES))
_IN_FINISHED = f"({', '.join('?' * len(_FINISHED))})"
#: The ``meta`` of a session pruned under ``lineage="summary"``.
SUMMARY_META = '{"pruned":true}'


def prune(
    conn: sqlite3.Connection,
    *,
    before: Mapping[str, float],
    keep: int | None,
    dead_before: float | None,
    lineage: str,
) -> dict[str, int]:
    """Delete what retention lets go of (see the module docstring), inside the caller's
    transaction; returns how many rows of each kind went."""
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS prune_ids (session_id TEXT PRIMARY KEY) WITHOUT ROWID"
    )
    conn.execute("DELETE FROM prune_ids")
    fresh = "meta <> ?"  # not already pruned to a summary
    for status, cutoff in sorted(before.items()):
        conn.execute(
            "INSERT OR IGNORE INTO prune_ids SELECT session_id FROM sessions "
            f"WHERE status = ? AND updated_at < ? AND {fresh}",
            (status, cutoff, SUMMARY_META),
        )
    if keep is not None:
        conn.execute(
            "INSERT OR IGNORE INTO prune_ids SELECT session_id FROM sessions "
            f"WHERE status IN {_IN_FINISHED} AND {fresh} "
            "ORDER BY updated_at DESC, rowid DESC LIMIT -1 OFFSET ?",
            (*_FINISHED, SUMMARY_META, keep),
        )
    spared = (
        # a parent that has not finished
        "SELECT child.session_id FROM sessions AS child JOIN sessions AS parent "
        f"ON parent.session_id = child.parent_id WHERE parent.status NOT IN {_IN_FINISHED}",
        # a child that has not finished
        f"SELECT parent_id FROM sessions WHERE status NOT IN {_IN_FINISHED} "
        "AND parent_id IS NOT NULL",
    )
    for query in spared:
        conn.execute(f"DELETE FROM prune_ids WHERE session_id IN ({query})", _FINISHED)
    conn.execute(
        "DELETE FROM prune_ids WHERE session_id IN "
        "(SELECT recipient FROM outbox WHERE delivered_at IS NULL) OR session_id IN "
        "(SELECT json_extract(payload, '$.run_id') FROM outbox "
        "WHERE delivered_at IS NULL AND json_valid(payload)) OR session_id IN "
        "(SELECT run_id FROM run_leases)"
    )
    counts = {"sessions": _count(conn, "SELECT count(*) FROM prune_ids")}
    chosen = "(SELECT session_id FROM prune_ids)"
    counts["events"] = _count(conn, f"SELECT count(*) FROM events WHERE session_id IN {chosen}")
    counts["messages"] = _count(conn, f"SELECT count(*) FROM messages WHERE session_id IN {chosen}")
    counts["outbox"] = conn.execute(
        "DELETE FROM outbox WHERE delivered_at IS NOT NULL AND (recipient IN "
        f"{chosen} OR (json_valid(payload) AND json_extract(payload, '$.run_id') IN {chosen}))"
    ).rowcount
    dead = f"recipient IN {chosen}"
    params: tuple[float, ...] = ()
    if dead_before is not None:
        dead, params = dead + " OR dead_at < ?", (dead_before,)
    counts["dead_letters"] = conn.execute(f"DELETE FROM outbox_dead WHERE {dead}", params).rowcount
    counts["receipts"] = conn.execute(
        "DELETE FROM receipts WHERE status = 'completed' AND json_valid(result) AND "
        f"json_extract(result, '$.run.run_id') IN {chosen}"
    ).rowcount
    if lineage == "summary":
        conn.execute(f"DELETE FROM events WHERE session_id IN {chosen}")
        conn.execute(f"DELETE FROM messages WHERE session_id IN {chosen}")
        conn.execute(f"DELETE FROM workflow_state WHERE run_id IN {chosen}")
        conn.execute(f"UPDATE sessions SET meta = ? WHERE session_id IN {chosen}", (SUMMARY_META,))
        counts["lineage_edges"] = 0
    else:
        counts["lineage_edges"] = _count(
            conn, f"SELECT count(*) FROM lineage_edges WHERE child_id IN {chosen}"
        )
        # Events, transcript, lineage edge and workflow state follow by ON DELETE CASCADE.
        conn.execute(f"DELETE FROM sessions WHERE session_id IN {chosen}")
    conn.execute("DELETE FROM prune_ids")
    return counts


def _count(conn: sqlite3.Connection, query: str) -> int:
    return int(conn.execute(query).fetchone()[0])
