"""The fence on a run's writes: only the process holding the run's lease at the generation it
took it under writes the run's transcript and end.

A worker that stalled past its lease (a stopped process, a partition from the database) may
wake up still driving a run that another worker has taken since. Its run's end is fenced by
the end's own lease drop (``Leases.end``); a transcript write that finds the stored
transcript moved asks ``fence`` before it appends after what another process wrote, and is
refused once the lease's generation moved on. The runtime also stops the stale run at its
next renewal.
"""

from __future__ import annotations

from membrane.durable.runs import LiveRun
from membrane.errors import RunLeased, StoreError
from membrane.store.base import Store

__all__ = ["fence"]


def fence(store: Store, record: LiveRun) -> None:
    """Refuse (``StoreError`` with ``cause: "run-leased"``) a write for ``record`` unless this
    process still holds the lease it drives the run under; a run driven with no lease (a
    store shared by no one) is never refused."""
    lease = record.lease
    if lease is None:
        return
    try:
        store.fence(record.run_id, owner=lease.owner, generation=lease.generation)
    except RunLeased as exc:
        raise StoreError(
            f"run {record.run_id!r} is driven by another process now; this process's write "
            f"was refused: {exc.message}",
            run_id=record.run_id,
            cause=RunLeased.code,
            owner=exc.data.get("owner"),
        ) from exc
