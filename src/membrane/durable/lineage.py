"""The lineage ledger (seed 002): one edge per delegation, parent to child, with its outcome.

An edge is supplementary provenance: writing it never fails a start or an end. ``record_edge``
runs inside the publication transaction (as a savepoint, so a failure leaves the publication
intact) and says whether the edge exists; ``complete_edge`` runs inside the transaction that
records the child's end. ``has_running_edge`` tells a resume whether the edge it continues is
still open, so the resumed run's end completes it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from membrane.durable.runs import RunResult
from membrane.errors import StoreError
from membrane.json_types import JSONValue
from membrane.store.base import Store, brief_digest

__all__ = ["complete_edge", "has_running_edge", "record_edge", "reopen_interrupted_edge"]

#: The longest result summary an edge keeps.
SUMMARY_LIMIT = 500


def record_edge(
    store: Store,
    *,
    parent_id: str,
    child_id: str,
    agent: str,
    task: str,
    fingerprint: Mapping[str, JSONValue],
) -> bool:
    """Write the edge ``parent_id -> child_id``; ``False`` when the store refused it."""
    with contextlib.suppress(StoreError), store.transaction():
        store.record_edge(
            parent_id=parent_id,
            child_id=child_id,
            child_role=agent,
            brief_digest=brief_digest(task),
            spawn_fingerprint=dict(fingerprint),
        )
        return True
    return False


def complete_edge(store: Store, result: RunResult) -> None:
    """Close the edge of ``result``'s run with its outcome and a short summary."""
    error = result.error or {}
    summary = result.text or error.get("message") or ""
    with contextlib.suppress(StoreError), store.transaction():
        store.complete_edge(
            result.run_id,
            status="completed" if result.ok else "failed",
            result_summary=str(summary)[:SUMMARY_LIMIT],
        )


def reopen_interrupted_edge(store: Store, *, parent_id: str | None, child_id: str) -> bool:
    """Reopen the edge of a resumed run that the sweeper marked ``interrupted``; whether it
    did (the resumed run's end then completes it)."""
    if parent_id is None:
        return False
    edges = store.edges(parent_id=parent_id)
    if not any(e.child_id == child_id and e.status == "interrupted" for e in edges):
        return False
    with contextlib.suppress(StoreError), store.transaction():
        store.reopen_edge(child_id)
        return True
    return False


def has_running_edge(store: Store, *, parent_id: str, child_id: str) -> bool:
    """Whether ``parent_id`` holds an open edge to ``child_id``."""
    return any(
        edge.child_id == child_id and edge.status == "running"
        for edge in store.edges(parent_id=parent_id)
    )
