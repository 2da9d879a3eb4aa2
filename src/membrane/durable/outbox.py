"""Durable delivery of completion notices to parents: the run outbox and its drainer.

DESIGN rule 8: deliveries to parents go through an outbox written in the same transaction,
drained with bounded backoff. The rule, step by step:

1. **Enqueue.** When a background child that has a parent ends, the transaction that records
   its end (``Finisher``: status, result, transcript, lineage edge, end event) also writes one
   outbox item: recipient the parent's run id, payload ``{"kind": "completion", "run_id",
   "agent", "status", "text", "error"}``. Both are written or neither is. No item is owed when
   the result reaches the parent inline: a foreground child's, and a background child's that
   the parent's own wait (``TaskWait``, ``wait``/``wait_all`` with the parent as ``caller``) is
   collecting when it ends: the call's result carries it. Such an item is marked delivered by
   the parent's first transcript write that holds the wait's result, in that write's
   transaction (``settled_by_wait``), never before: a kill in between leaves it pending.
2. **Offer.** In the same synchronous step, right after the commit, a parent live in this
   runtime that takes notices gets the ``task_notification`` (with ``delivery="ID"``) queued
   for its next turn boundary, with an acknowledgement callback. The item is then written due
   ``BASE_DELAY`` later, so that the drainer leaves it alone while the notice waits.
3. **Acknowledge.** The loop calls back when the notice joins the conversation; the callback
   appends the parent's transcript (which now holds the notice) and marks the item delivered,
   in one transaction. So an item is delivered exactly when its notice is in the parent's
   stored transcript. A notice the loop drops (the parent gave its final answer, or stopped,
   with it still queued) is never acknowledged, and its item stays pending.
4. **Drain.** ``OutboxDrainer.run`` lives in the runtime's task group until the runtime
   closes. It wakes when an item could not be offered at once, when a run is resumed, and at
   the earliest ``next_attempt_at`` of any pending item; never otherwise. Each pass takes the
   due items, oldest first: a notice still queued in a live parent has its lease extended; a
   notice the recipient's conversation already holds is acknowledged; a recipient live here
   that takes notices is offered it; anything else (a parent not live here, ended, stopping,
   or one whose provider takes no notices) is rescheduled with ``mark_attempt``. Each of these
   reschedules is ``min(BASE_DELAY * 2**attempts, MAX_DELAY)`` seconds: 0.5 s, 1 s, 2 s, ...
   at most 30 s.
5. **Resume.** ``SubagentRuntime.resume`` offers the resumed run every pending item addressed
   to it, due or not, before its loop starts: the notices join its conversation after the
   resume message, before its first model request. An item whose notice the stored transcript
   already holds (same ``delivery`` and ``run_id``) is acknowledged without a second copy.

An item addressed to a run that never runs again stays pending (``pending()`` lists it): it is
not lost, and each open runtime on the store reschedules it at most every ``MAX_DELAY``
seconds. When the end's transaction fails, there is no item: a live parent then gets the notice
in this process only, unacknowledged, as before the outbox existed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, TypeVar

import anyio

from membrane.durable.crashpoints import crash_point
from membrane.durable.deliveries import holds, render, task_notification
from membrane.durable.runs import LiveRun, RunResult, RunsTable
from membrane.durable.transcripts import append_transcript
from membrane.errors import StoreError
from membrane.store.base import OutboxItem, Store
from membrane.vocabulary import END_STATES

__all__ = [
    "BASE_DELAY",
    "MAX_ATTEMPTS",
    "MAX_DELAY",
    "Completion",
    "OutboxDrainer",
    "backoff",
    "task_notification",
]

T = TypeVar("T")

#: The first retry delay, in seconds, and the lease of a notice waiting in a live parent.
BASE_DELAY: Final = 0.5
#: The longest retry delay, in seconds.
MAX_DELAY: Final = 30.0
#: Items one drain pass takes; a full batch is followed by another pass at once.
BATCH: Final = 100
#: Items a resumed run is offered at once; any beyond come with the drainer's passes.
RESUME_BATCH: Final = 1000
_KIND: Final = "completion"
#: Delivery attempts before an item is dead-lettered, unless the runtime says otherwise.
MAX_ATTEMPTS: Final = 10
_ATTRS = re.compile(r'(\w+)="([^"]*)"')


def backoff(attempts: int) -> float:
    """The delay after ``attempts`` earlier attempts: doubling from ``BASE_DELAY``, capped."""
    return min(MAX_DELAY, BASE_DELAY * 2.0 ** min(max(attempts, 0), 32))


@dataclass(slots=True)
class Completion:
    """The notice a child's end owes its parent, between the end's transaction and the offer.

    ``parent`` is the recipient's live record when it could take the notice at the end;
    ``item_id`` is set once the item is written (``None`` when the transaction failed).
    """

    recipient: str
    payload: dict[str, Any]
    parent: LiveRun | None
    item_id: int | None = None


class OutboxDrainer:
    """Delivers the outbox of one runtime's store into the conversations of its live runs.

    ``runs`` is the runtime's table of live runs; ``commit(work)`` runs store writes
    in one transaction with the runtime's queued events. ``clock`` gives the seconds since the
    epoch that due times are counted in. ``max_attempts`` failed attempts dead-letter an item
    (``Store.bury_outbox``); ``stop(run_id)`` applies a ``cancel`` delivery.
    """

    def __init__(
        self,
        store: Store,
        *,
        runs: RunsTable,
        commit: Callable[[Callable[[], None]], None],
        clock: Callable[[], float] = time.time,
        max_attempts: int = MAX_ATTEMPTS,
        stop: Callable[[str], None] | None = None,
    ) -> None:
        #: Applies an ``answer`` delivery to its live recipient (``membrane.runtime.questions``);
        #: set by the runtime that answers questions.
        self.answer: Callable[[OutboxItem, LiveRun], bool] | None = None
        self._store = store
        self._runs = runs
        self._commit = commit
        self._clock = clock
        self._max_attempts = max_attempts
        self._stop = stop
        #: Items whose notice is queued in a live parent, awaiting its turn boundary.
        self._in_flight: dict[int, LiveRun] = {}
        #: The ``on_delivered`` of each notice in flight, which names it to ``withdraw``.
        self._offered: dict[int, Callable[[], None]] = {}
        self._wakeup: anyio.Event | None = None
        self._closed = False
        self._failures = 0
        #: Store failures met while delivering (the items stayed pending).
        self.errors: list[StoreError] = []

    # -- the child's end (called by the Finisher) ---------------------------------------------

    def completion(self, record: LiveRun, result: RunResult) -> Completion | None:
        """The notice ``record``'s end owes its parent, or ``None`` when none is owed."""
        if not record.background or record.parent_id is None:
            return None
        parent = self._runs.live(record.parent_id)
        if parent is None or not _takes_notices(parent) or record.parent_waits:
            # While the parent's own wait collects this result, the item is written but not
            # offered; ``settled_by_wait`` acknowledges it once that wait has returned it.
            parent = None
        payload = {
            "kind": _KIND,
            "run_id": record.run_id,
            "agent": record.agent,
            "status": result.status,
            "text": result.text,
            "error": None if result.error is None else dict(result.error),
        }
        return Completion(record.parent_id, payload, parent)

    def enqueue(self, completion: Completion) -> int:
        """Write the item; call it inside the transaction that records the child's end."""
        due = None if completion.parent is None else self._clock() + BASE_DELAY
        return self._store.enqueue_outbox(completion.recipient, completion.payload, not_before=due)

    def offer(self, completion: Completion) -> None:
        """After the end's transaction: queue the notice in a live parent, or wake the drainer.
        Without an item (the transaction failed) a live parent gets an unacknowledged notice."""
        parent = completion.parent
        if completion.item_id is None:
            if parent is not None and _takes_notices(parent):
                notice = render(completion.payload, delivery=None)
                if notice is not None:
                    _notify(parent, notice, None)
            return
        item = OutboxItem(completion.item_id, completion.recipient, completion.payload, 0, 0, 0)
        if parent is None or self._offer(item, parent, fresh=True) is None:
            self.wake()

    def settle(self, recipient: str, matches: Callable[[Mapping[str, Any]], bool]) -> None:
        """``recipient``'s pending items whose notice is moot now (``matches`` their payload: a
        question a host answered before the parent read it) are delivered without being read:
        a notice still waiting in a live recipient for its turn boundary is taken back. One
        that has joined its conversation already is acknowledged as it would be."""
        record = self._runs.live(recipient)
        try:
            items = self._store.pending_outbox(recipient=recipient, limit=RESUME_BATCH)
        except StoreError as exc:
            self.errors.append(exc)
            return
        for item in items:
            if not matches(item.payload):
                continue
            if self._in_flight.get(item.id) is not None:
                if record is None or not _withdraw(record, self._offered.get(item.id)):
                    continue  # it joined the conversation: its acknowledgement delivers it
                self._in_flight.pop(item.id, None)
                self._offered.pop(item.id, None)
            try:
                self._commit(partial(self._store.mark_delivered, item.id))
            except StoreError as exc:
                self.errors.append(exc)

    def settled_by_wait(self, record: LiveRun) -> None:
        """The parent's own wait returned ``record``'s result: its item is delivered as soon
        as the parent's stored transcript holds that wait's result.

        Until then the item stays pending but held for the parent (the drainer offers it to
        no one), and the parent's next transcript write marks it delivered in the same
        transaction (``append_transcript``): a process killed in between leaves it pending,
        so the resumed parent gets the notice instead of losing it. Only a wait that returned
        settles it; a cancelled or timed-out wait leaves the item pending, so a stopped or
        resumed parent still gets the notice.
        """
        item_id = record.outbox_item
        if item_id is None:
            return
        record.outbox_item = None
        parent = None if record.parent_id is None else self._runs.live(record.parent_id)
        if parent is not None and not parent.finished:
            offered = self._offered.get(item_id)
            if self._in_flight.get(item_id) is parent and _withdraw(parent, offered):
                # Its notice still waited in the parent for a turn boundary: the wait's result
                # carries it instead (the child ended before the parent began to wait).
                self._in_flight.pop(item_id, None)
                self._offered.pop(item_id, None)
            parent.settled = (*parent.settled, (item_id, len(parent.child.messages())))
            return
        self._in_flight.pop(item_id, None)
        self._offered.pop(item_id, None)
        try:
            self._store.mark_delivered(item_id)
        except StoreError as exc:
            self.errors.append(exc)

    # -- resume and draining --------------------------------------------------------------------

    def resumed(self, record: LiveRun) -> None:
        """Offer the just-resumed ``record`` every pending item addressed to it, its dead
        letters too (revived first: the recipient they waited for is back). A ``cancel`` owed
        to it is settled without stopping it: the resume is the newer instruction."""
        try:
            for dead in self._store.dead_outbox(recipient=record.run_id, limit=RESUME_BATCH):
                self._store.revive_outbox(dead.id)
            items = self._store.pending_outbox(recipient=record.run_id, limit=RESUME_BATCH)
            for item in [i for i in items if i.payload.get("kind") == "cancel"]:
                self._store.mark_delivered(item.id)
            items = [i for i in items if i.payload.get("kind") != "cancel"]
        except StoreError as exc:
            self.errors.append(exc)
            self.wake()
            return
        now = self._clock()
        for item in items:
            self._attempt(item, now)

    def pending(self, recipient: str | None = None) -> list[OutboxItem]:
        """Undelivered items (``recipient``'s, or all), oldest first, at most 1,000."""
        return self._store.pending_outbox(recipient=recipient, limit=RESUME_BATCH)

    def deliver(self, recipient: str, payload: Mapping[str, Any]) -> int:
        """Write a delivery for ``recipient``; call it inside the transaction that completes
        its receipt. ``offer_item`` it once that transaction commits."""
        return self._store.enqueue_outbox(recipient, dict(payload))

    def offer_item(self, item_id: int, recipient: str, payload: Mapping[str, Any]) -> None:
        """After the delivery's transaction: hand it to a recipient live here, else wake the
        drainer (which retries with backoff and dead-letters it in the end)."""
        item = OutboxItem(item_id, recipient, dict(payload), 0, 0, 0)
        record = self._runs.live(recipient)
        if record is None or self._offer(item, record, fresh=True) is None:
            self.wake()

    def step(self, *, now: float | None = None) -> float | None:
        """One drain pass over the items due at ``now`` (default: the clock). Returns when the
        next pass is due (``None``: no pending item, wait to be woken)."""
        now = self._clock() if now is None else now
        errors = len(self.errors)
        try:
            items = self._store.due_outbox(now=now, limit=BATCH)
            for item in items:
                self._attempt(item, now)
            next_at = now if len(items) == BATCH else self._store.next_outbox_attempt()
        except StoreError as exc:
            self.errors.append(exc)
            next_at = now
        if len(self.errors) > errors:
            # A store that fails would otherwise leave due items due: back off, bounded.
            self._failures += 1
            return max(now if next_at is None else next_at, now + backoff(self._failures - 1))
        self._failures = 0
        return next_at

    def wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    async def run(self) -> None:
        """Drain until ``close()``; run it in the runtime's task group."""
        while not self._closed:
            self._wakeup = anyio.Event()
            next_at = self.step()
            delay = None if next_at is None else max(0.0, next_at - self._clock())
            with anyio.move_on_after(delay):
                await self._wakeup.wait()

    def close(self) -> None:
        self._closed = True
        self._in_flight.clear()
        self._offered.clear()
        self.wake()

    # -- one item -------------------------------------------------------------------------------

    def _attempt(self, item: OutboxItem, now: float) -> None:
        child = self._runs.live(str(item.payload.get("run_id", "")))
        if child is not None and child.parent_waits and child.outbox_item == item.id:
            # The parent's own wait is collecting this result right now; look again later.
            self._postpone(item, now)
            return
        record = self._runs.live(item.recipient)
        if record is not None and any(settled == item.id for settled, _ in record.settled):
            # The recipient's wait returned it; its next transcript write marks it delivered.
            self._postpone(item, now)
            return
        waiting = self._in_flight.get(item.id)
        if waiting is not None and (waiting is not record or record.finished):
            del self._in_flight[item.id]
            self._offered.pop(item.id, None)
            waiting = None
        if waiting is not None:
            # Queued in a live recipient for its turn boundary: not a failed attempt.
            self._postpone(item, now)
            return
        outcome = None if record is None else self._offer(item, record)
        if outcome == "acknowledged":
            return
        if outcome == "waiting":
            self._postpone(item, now)
            return
        self._later(item, now, _why(item, record, ended=record is None and self._ended(item)))

    def _ended(self, item: OutboxItem) -> bool:
        """Whether the store says ``item``'s recipient has ended (a run that left memory)."""
        try:
            header = self._store.get_header(item.recipient)
        except StoreError:
            return False
        return header is not None and header.status in END_STATES

    def _postpone(self, item: OutboxItem, now: float) -> None:
        try:
            self._store.postpone_outbox(item.id, next_attempt_at=now + BASE_DELAY)
        except StoreError as exc:
            self.errors.append(exc)

    def _later(self, item: OutboxItem, now: float, why: str) -> None:
        """Count a failed attempt: retry after the backoff, or dead-letter the item once it
        has had ``max_attempts``."""
        store = self._store
        attempts = item.attempts + 1
        try:
            with store.transaction():
                # Counted first, so a dead letter keeps every attempt its error speaks of.
                store.mark_attempt(item.id, next_attempt_at=now + backoff(item.attempts))
                if attempts >= self._max_attempts:
                    times = "1 attempt" if attempts == 1 else f"{attempts} attempts"
                    store.bury_outbox(item.id, error=f"{why} (gave up after {times})")
                else:
                    store.note_outbox_error(item.id, why)
        except StoreError as exc:
            self.errors.append(exc)

    def _offer(self, item: OutboxItem, record: LiveRun, *, fresh: bool = False) -> str | None:
        """``acknowledged`` (the conversation already held it), ``waiting`` (queued in the
        parent), or ``None`` (the parent cannot take it now). A ``fresh`` item was written just
        now, so no conversation can hold it yet."""
        if item.payload.get("kind") == "cancel":
            return "acknowledged" if self._cancel(item, record) else None
        # An ``answer``: the waiting ``AskParent`` call returns it; else it is a notice.
        if (
            item.payload.get("kind") == "answer"
            and self.answer is not None
            and not record.finished
            and self.answer(item, record)
        ):
            return "acknowledged"
        if not fresh and holds(record.child.messages(), item.id, item.payload):
            return "acknowledged" if self._acknowledge(item.id, record) else None
        if not _takes_notices(record):
            return None
        notice = render(item.payload, delivery=item.id)
        ack = partial(self._ack, item.id, record)
        if notice is None or not _notify(record, notice, ack):
            return None
        self._in_flight[item.id] = record
        self._offered[item.id] = ack
        return "waiting"

    def _cancel(self, item: OutboxItem, record: LiveRun) -> bool:
        """Apply a ``cancel``: the recipient is asked to stop (an ended one needs nothing),
        and the item is delivered."""
        if self._stop is None:
            return False
        if not record.finished:
            self._stop(record.run_id)
        try:
            self._commit(partial(self._store.mark_delivered, item.id))
        except StoreError as exc:
            self.errors.append(exc)
            return False
        return True

    def _ack(self, item_id: int, record: LiveRun) -> None:
        self._acknowledge(item_id, record)

    def _acknowledge(self, item_id: int, record: LiveRun) -> bool:
        """Store ``record``'s transcript (which holds the notice) and mark the item delivered,
        in one transaction. On failure the item stays pending; the next pass finds the notice
        in the conversation and acknowledges it then."""
        self._in_flight.pop(item_id, None)
        self._offered.pop(item_id, None)
        store = self._store

        def work() -> None:
            append_transcript(store, record)
            store.mark_delivered(item_id)
            crash_point("delivery.ack")

        crash_point("delivery.joined")
        try:
            self._commit(work)
        except StoreError as exc:
            self.errors.append(exc)
            return False
        crash_point("delivery.acked")
        return True


def _takes_notices(record: LiveRun) -> bool:
    return (
        not record.finished
        and not record.stop_requested
        and callable(getattr(record.child, "notify", None))
    )


def _withdraw(record: LiveRun, on_delivered: Callable[[], None] | None) -> bool:
    """Take back a notice queued in ``record`` that has not joined its conversation, where its
    provider's child can (``withdraw``, as the in-process child's loop does)."""
    withdraw = getattr(record.child, "withdraw", None)
    return on_delivered is not None and callable(withdraw) and withdraw(on_delivered) is True


def _notify(record: LiveRun, notice: str, on_delivered: Callable[[], None] | None) -> bool:
    # A provider's transport may fail in any way; the item then stays pending and is retried.
    try:
        return record.child.notify(notice, on_delivered=on_delivered) is True
    except Exception:
        return False


def _why(item: OutboxItem, record: LiveRun | None, *, ended: bool = False) -> str:
    """Why ``item`` could not be delivered now, as its last error says (``ended``: the store
    says its recipient, not held here, has ended)."""
    who = repr(item.recipient)
    if record is None and not ended:
        return f"recipient {who} is not running in this process"
    if record is None or record.finished:
        return f"recipient {who} has ended; resume it to deliver"
    if record.stop_requested:
        return f"recipient {who} is stopping"
    return f"recipient {who} takes no deliveries (its provider cannot be notified)"
