"""How a published run is driven to its end, and what its end does.

``Finisher.drive`` runs the child in the runtime's task group and always finishes it, shielded
from cancellation, whatever happened: a child stopped before it started, a ``MembraneError``
(the run's error), any other exception (a ``RunError`` naming the provider).

Finishing, in order:

1. an isolated child's worktree is finished (kept with its branch on success, else removed);
2. one store transaction records the end: the header's status and result, the rest of the
   transcript, the lineage edge's outcome, a background child's completion notice for its
   parent (an outbox item, see ``membrane.durable.outbox``) and the end event. When the store
   cannot write it (a full disk, a value no store can encode), the run ends here as
   ``store-error`` (status ``error``, its text and usage kept), never as what the store did not
   take; the durable row keeps its last status, which the sweeper ends as ``interrupted``;
3. the end event reaches the streams, and waiters wake;
4. the run's own children are asked to stop (a child ends when its parent ends);
5. its concurrency slot, if it held one, goes to the next run in line;
6. the completion notice is offered to the parent, when it is live here
   (``task_notification``, acknowledged once it is in the parent's conversation);
7. the run leaves memory unless its running parent may still ask for it (``LiveRuns.ended``);
   the store answers for it from then on.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio

from membrane.durable.crashpoints import crash_point
from membrane.durable.lineage import complete_edge
from membrane.durable.outbox import OutboxDrainer
from membrane.durable.runs import RunResult
from membrane.durable.sweeper import Leases
from membrane.durable.transcripts import save_transcript
from membrane.errors import MembraneError, RunError, RunLeased, StoreError
from membrane.models.base import Usage
from membrane.runtime.events import EventHub
from membrane.runtime.provider import ChildOutcome
from membrane.runtime.runs import RunRecord, event_kind
from membrane.runtime.worktree import WorktreeManager
from membrane.store.base import Store

__all__ = ["Finisher"]

#: The outcome of a run stopped before it started (one shared value, not one per run).
_NOT_RUN = ChildOutcome(status="stopped")


class Finisher:
    """The end of every run of one runtime.

    ``live(run_id)`` is the runtime's live record of a run; ``stop(record)`` asks a run to stop;
    ``release(run_id)`` gives an ended run's slot back; ``outbox`` writes and offers the
    completion notices.
    """

    def __init__(
        self,
        store: Store,
        *,
        hub: EventHub,
        outbox: OutboxDrainer,
        worktrees: WorktreeManager | None,
        live: Callable[[str], RunRecord | None],
        stop: Callable[[RunRecord], None],
        release: Callable[[str], None],
        forget: Callable[[RunRecord], None],
        leases: Leases | None = None,
    ) -> None:
        self._store = store
        self._hub = hub
        self._outbox = outbox
        self._worktrees = worktrees
        self._live = live
        self._stop = stop
        self._release = release
        self._forget = forget
        self._leases = leases

    async def drive(self, record: RunRecord) -> None:
        """Run ``record``'s child to its end (unless it was stopped first), then finish it."""
        outcome = _NOT_RUN
        try:
            if record.unsynced and not record.stop_requested:
                # Started at its commit: nothing the child does may precede a durable start.
                await self._store.barrier()
            if not record.stop_requested:
                spending = record.spending
                deadline = None if spending is None else spending.deadline()
                if deadline is None:
                    outcome = await record.child.run()
                else:
                    outcome = await self._run_until(record, deadline)
        except MembraneError as exc:
            outcome = ChildOutcome(status="error", error=exc.to_dict())
        except Exception as exc:
            failure = RunError(
                f"provider {record.provider!r} failed while running {record.run_id!r}: "
                f"{type(exc).__name__}: {exc}",
                provider=record.provider,
            )
            outcome = ChildOutcome(status="error", error=failure.to_dict())
        finally:
            outcome = self._ended(record, outcome)
            worktree: dict[str, Any] | None = None
            if record.worktree is not None and self._worktrees is not None:
                # The one step of an end that awaits; shielded, as the whole end must run.
                with anyio.CancelScope(shield=True):
                    finished = await anyio.to_thread.run_sync(
                        partial(self._worktrees.finish, record.worktree, success=outcome.ok)
                    )
                worktree = dict(finished.to_dict())
            # The rest never awaits, so no cancellation can reach it (and no cancel scope of
            # its own is spent on every run).
            self._finish(record, outcome, worktree)

    async def _run_until(self, record: RunRecord, deadline: float) -> ChildOutcome:
        """The child's run, ended at the wall-time ``deadline`` its budget sets. (A run with
        no deadline is awaited in ``drive`` itself: no frame and no closure cells of this
        coroutine stay alive for each waiting child.)"""
        spending = record.spending
        assert spending is not None
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                await anyio.sleep(max(0.0, deadline - time.monotonic()))
                if not record.finished and record.ended_by is None:
                    record.ended_by = spending.expired()
                    self._stop(record)

            group.start_soon(watch)
            outcome = await record.child.run()
            group.cancel_scope.cancel()
        return outcome

    @staticmethod
    def _ended(record: RunRecord, outcome: ChildOutcome) -> ChildOutcome:
        """The outcome the run ends with; its spending stops counting."""
        if record.ended_by is not None and outcome.status == "stopped":
            # A budget ended it (``stop()`` was how): it ends as that error, usage kept.
            error = record.ended_by.to_dict()
            outcome = dataclasses.replace(outcome, status="error", error=error)
        if record.spending is not None:
            record.spending.close()
        return outcome

    def _finish(
        self, record: RunRecord, outcome: ChildOutcome, worktree: dict[str, Any] | None
    ) -> None:
        descendants = Usage()
        cost: int | None = 0
        for child_id in record.children:
            child = self._live(child_id)
            if child is not None and child.result is not None:
                descendants = descendants + child.result.subtree_usage
                more = child.result.cost_total
                cost = None if cost is None or more is None else cost + more
        result = record.result_of(
            outcome, worktree=worktree, descendants=descendants, descendants_cost=cost
        )
        record.status = result.status
        record.result = result
        kind = event_kind(result.status)
        data = result.to_dict()
        store = self._store
        owed = self._outbox.completion(record, result)

        def write() -> tuple[int, int | None]:
            store.set_status(record.run_id, result.status, result=data)
            save_transcript(store, record)
            if record.has_edge:
                complete_edge(store, result)
            item_id = None if owed is None else self._outbox.enqueue(owed)
            if self._leases is not None:
                # Fenced: a run another owner took over is not ours to end (all is undone).
                self._leases.end(record.run_id)
            seq = store.append_event(record.run_id, kind, data)
            crash_point("end.write")
            return seq, item_id

        failure: StoreError | None = None
        try:
            if record.queued:
                # Its driver (a queue's worker) recorded the end; this runtime only tells
                # its own waiters and streams.
                seq, item_id = 0, None
            else:
                seq, item_id = self._hub.commit(write)
                crash_point("end.written")
        except RunLeased as exc:
            # Another owner took the run over (its lease moved on): the end is that owner's
            # to write and to tell. The run ends here as it did, and nothing of it is stored.
            self._hub.errors.append(StoreError(exc.message, run_id=record.run_id))
            seq, item_id, owed = 0, None, None
        except StoreError as exc:
            failure = exc
        except Exception as exc:
            # Whatever the end of a run cannot store (a value no store can encode), it still
            # ends here: the run is never left `running` and no sibling is stopped.
            failure = StoreError(f"{type(exc).__name__}: {exc}", run_id=record.run_id)
        if failure is not None:
            # Nothing the store did not take is told: the run ends here as the store's failure
            # (never `completed`), its usage and text kept; the store still says `running`,
            # which the sweeper ends as `interrupted`.
            self._hub.errors.append(failure)
            seq, item_id = 0, None
            result = _not_stored(result, failure)
            record.status = result.status
            record.result = result
            kind = event_kind(result.status)
            data = result.to_dict()
            owed = self._outbox.completion(record, result)
            record.end_unstored = True
        record.outbox_item = item_id
        self._hub.deliver(
            seq=seq,
            run_id=record.run_id,
            parent_id=record.parent_id,
            agent=record.agent,
            kind=kind,
            data=data,
        )
        record.mark_done()
        for child_id in record.children:
            child = self._live(child_id)
            if child is not None:
                self._stop(child)
        self._release(record.run_id)
        if owed is not None:
            owed.item_id = item_id
            self._outbox.offer(owed)
        self._forget(record)


def _not_stored(result: RunResult, failure: StoreError) -> RunResult:
    """``result`` ended as ``store-error``: the store could not write it."""
    error = StoreError(
        f"the end of run {result.run_id!r} ({result.status}) could not be stored: "
        f"{failure.message}; the store still holds the run as running",
        run_id=result.run_id,
        ended=result.status,
    )
    outcome = dataclasses.replace(result.outcome, status="error", error=error.to_dict())
    return dataclasses.replace(result, outcome=outcome)
