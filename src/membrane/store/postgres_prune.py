"""Retention for ``PostgresStore``: what ``sqlite_prune`` deletes, by the same rules, in
PostgreSQL's SQL (one transaction of the caller's cursor).

The finished sessions past their status's cutoff, or past the ``keep`` newest, are chosen; a
session still referenced is spared (an unfinished parent or child, an undelivered notice to it
or about it, a lease); then their rows go (``sessions`` cascades to events, transcripts, the
lineage edge and workflow state), or all but the header and the edge under
``lineage="summary"``. The space is PostgreSQL's to reuse (autovacuum), so no bytes are
reported as given back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from membrane.store.sqlite_prune import SUMMARY_META
from membrane.vocabulary import FINISHED_STATES

if TYPE_CHECKING:
    import psycopg

__all__ = ["prune"]

_FINISHED = sorted(FINISHED_STATES)


def prune(
    cur: psycopg.Cursor[Any],
    *,
    before: Mapping[str, float],
    keep: int | None,
    dead_before: float | None,
    lineage: str,
) -> dict[str, int]:
    """Delete what retention lets go of (see the module docstring) inside the caller's
    transaction; returns how many rows of each kind went."""
    chosen: set[str] = set()
    for status, cutoff in sorted(before.items()):
        rows = cur.execute(
            "SELECT session_id FROM sessions WHERE status = %s AND updated_at < %s AND meta <> %s",
            (status, cutoff, SUMMARY_META),
        ).fetchall()
        chosen.update(row[0] for row in rows)
    if keep is not None:
        rows = cur.execute(
            "SELECT session_id FROM sessions WHERE status = ANY(%s) AND meta <> %s "
            "ORDER BY updated_at DESC, ord DESC OFFSET %s",
            (_FINISHED, SUMMARY_META, keep),
        ).fetchall()
        chosen.update(row[0] for row in rows)
    spared = cur.execute(
        # a parent that has not finished, a child that has not finished, an undelivered
        # notice to the run or about it, a lease
        "SELECT child.session_id FROM sessions AS child JOIN sessions AS parent "
        "ON parent.session_id = child.parent_id WHERE NOT parent.status = ANY(%s) "
        "UNION SELECT parent_id FROM sessions WHERE NOT status = ANY(%s) "
        "AND parent_id IS NOT NULL "
        "UNION SELECT recipient FROM outbox WHERE delivered_at IS NULL "
        "UNION SELECT payload::jsonb ->> 'run_id' FROM outbox WHERE delivered_at IS NULL "
        "UNION SELECT run_id FROM run_leases",
        (_FINISHED, _FINISHED),
    ).fetchall()
    ids = sorted(chosen - {row[0] for row in spared})
    counts = {"sessions": len(ids)}
    counts["events"] = _count(cur, "SELECT count(*) FROM events WHERE session_id = ANY(%s)", ids)
    counts["messages"] = _count(
        cur, "SELECT count(*) FROM messages WHERE session_id = ANY(%s)", ids
    )
    counts["outbox"] = cur.execute(
        "DELETE FROM outbox WHERE delivered_at IS NOT NULL AND (recipient = ANY(%s) "
        "OR payload::jsonb ->> 'run_id' = ANY(%s))",
        (ids, ids),
    ).rowcount
    if dead_before is None:
        cur.execute("DELETE FROM outbox_dead WHERE recipient = ANY(%s)", (ids,))
    else:
        cur.execute(
            "DELETE FROM outbox_dead WHERE recipient = ANY(%s) OR dead_at < %s",
            (ids, dead_before),
        )
    counts["dead_letters"] = cur.rowcount
    counts["receipts"] = cur.execute(
        "DELETE FROM receipts WHERE status = 'completed' "
        "AND result::jsonb #>> '{run,run_id}' = ANY(%s)",
        (ids,),
    ).rowcount
    if lineage == "summary":
        cur.execute("DELETE FROM events WHERE session_id = ANY(%s)", (ids,))
        cur.execute("DELETE FROM messages WHERE session_id = ANY(%s)", (ids,))
        cur.execute("DELETE FROM workflow_state WHERE run_id = ANY(%s)", (ids,))
        cur.execute("UPDATE sessions SET meta = %s WHERE session_id = ANY(%s)", (SUMMARY_META, ids))
        counts["lineage_edges"] = 0
    else:
        counts["lineage_edges"] = _count(
            cur, "SELECT count(*) FROM lineage_edges WHERE child_id = ANY(%s)", ids
        )
        cur.execute("DELETE FROM sessions WHERE session_id = ANY(%s)", (ids,))
    return counts


def _count(cur: psycopg.Cursor[Any], query: str, ids: list[str]) -> int:
    row = cur.execute(query, (ids,)).fetchone()
    return 0 if row is None else int(row[0])
