"""Concurrency slots: how many background runs, and how many foreground children, of one
runtime run at once.

``settings.max_concurrency`` bounds the background runs that hold a slot; a background start
beyond it is published ``queued`` and admitted in order. ``settings.max_foreground_children``
(no cap when unset) bounds, the same way and in a pool of their own, the foreground children (a
foreground run with a parent: a ``Task`` call's child); a host's own top-level runs take no slot.
A foreground start past the cap is never refused: it is published ``queued`` and its ``Task``
call waits until it is admitted (``SlotPools``).

A run blocked on its own children (``wait``/``wait_all``/``stop`` with ``caller`` set to it, as
``TaskWait``, a foreground ``Task`` and ``TaskStop`` do) lends its slot, in either pool, for the
duration, so its queued children can run (a foreground child under a cap of 1 that starts a
foreground child of its own lends it the one slot: no parent's slot deadlocks its children);
when the wait ends it takes its slot back at once, for a moment past the
limit if the lent slot went to a queued run (no queued run starts until the count is under the
limit again). Without the loan, a background parent waiting on a child queued behind its own slot
would wait forever; without the immediate return, a ``TaskWait`` timeout would wait on unrelated
runs.

Invariant: ``used`` is the number of runs in ``holding``; a run is never both holding a slot and
lending it. Every method is synchronous, so the counts never change between a check and the
action it guards.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable

from membrane.runtime.runs import RunRecord

__all__ = ["SlotPools", "Slots"]


class Slots:
    """The slots and the queue of one runtime.

    ``live(run_id)`` is the runtime's live record of a run (``None`` when it has none).
    ``start(record)`` starts driving a queued record that was just admitted, and returns
    ``False`` (leaving it queued) when the runtime can no longer start runs.
    """

    def __init__(
        self,
        limit: int,
        *,
        live: Callable[[str], RunRecord | None],
        start: Callable[[RunRecord], bool],
        governs: Callable[[RunRecord], bool] = lambda record: record.background,
    ) -> None:
        self.limit = limit
        #: Which runs this pool holds (default: the background runs).
        self.governs = governs
        self._live = live
        self._start = start
        self._queue: deque[RunRecord] = deque()
        #: Each queued run's ticket: tickets rise by one along the queue, so a run's place is
        #: its ticket minus the head's, found in O(1) (taking a run out of the middle, when a
        #: queued run is stopped, renumbers the runs behind it).
        self._tickets: dict[str, int] = {}
        self._next_ticket = 0
        self._used = 0
        self._holding: set[str] = set()
        #: Runs that lent their slot while they wait on their own children: how many waits.
        self._lent: dict[str, int] = {}

    def must_queue(self, record: RunRecord) -> bool:
        """Whether a new run of this pool waits for a slot."""
        return self.governs(record) and not record.queued and self._used >= self.limit

    def place(self, record: RunRecord) -> bool:
        """Place a just-published run: ``False`` when it is ``queued`` (it waits in line),
        ``True`` when it runs now (a background run then holds a slot)."""
        if record.status == "queued":
            self._queue.append(record)
            self._tickets[record.run_id] = self._next_ticket
            self._next_ticket += 1
            return False
        if self.governs(record) and not record.queued:
            self._take(record.run_id)
        return True

    def position(self, record: RunRecord) -> int | None:
        """The 1-based place of a queued run in line (``None`` when it is not queued)."""
        ticket = self._tickets.get(record.run_id)
        if record.status != "queued" or ticket is None:
            return None
        return ticket - self._tickets[self._queue[0].run_id] + 1

    def dequeue(self, record: RunRecord) -> bool:
        """Take a queued run out of line (it is being stopped); whether it was queued."""
        ticket = self._tickets.pop(record.run_id, None)
        if ticket is None:
            return False
        if record is self._queue[0]:
            self._queue.popleft()
            return True
        index = ticket - self._tickets[self._queue[0].run_id]
        del self._queue[index]
        for behind in range(index, len(self._queue)):
            self._tickets[self._queue[behind].run_id] -= 1
        self._next_ticket -= 1
        return True

    def release(self, run_id: str) -> None:
        """An ended run gives its slot back, if it holds one; the next in line is admitted."""
        if run_id in self._holding:
            self._holding.discard(run_id)
            self._used -= 1
            self._admit()

    @contextlib.asynccontextmanager
    async def lending(self, caller: str | None) -> AsyncIterator[None]:
        """While ``caller`` waits on its own children, its slot (if it holds one) is lent."""
        if caller is None or (caller not in self._holding and caller not in self._lent):
            yield
            return
        count = self._lent.get(caller, 0)
        self._lent[caller] = count + 1
        if count == 0:
            self._holding.discard(caller)
            self._used -= 1
            self._admit()
        try:
            yield
        finally:
            self._reclaim(caller)

    def _reclaim(self, run_id: str) -> None:
        count = self._lent.pop(run_id) - 1
        if count:
            self._lent[run_id] = count
            return
        record = self._live(run_id)
        if record is None or record.finished:
            return  # it ended while its slot was lent: nothing to take back
        # Take the slot back at once, for a moment past the limit if the lent slot went to a
        # queued run: a waiting parent never waits on unrelated runs (a TaskWait timeout is
        # honoured), and ``_admit`` starts no queued run until the count is under the limit.
        self._take(run_id)

    def _take(self, run_id: str) -> None:
        self._used += 1
        self._holding.add(run_id)

    def _admit(self) -> None:
        """Hand free slots to the queue, in order."""
        while self._queue and self._used < self.limit:
            record = self._queue[0]
            if not self._start(record):
                return
            self._queue.popleft()
            del self._tickets[record.run_id]
            self._take(record.run_id)


def _foreground_child(record: RunRecord) -> bool:
    return not record.background and record.parent_id is not None


class SlotPools:
    """The background pool (``max_concurrency``) and, when capped, the foreground children's
    pool (``max_foreground_children``), as one ``Slots``-like object: each run is placed in
    the pool that holds it, and a waiting parent lends its slot in both."""

    def __init__(
        self,
        limit: int,
        *,
        foreground: int | None,
        live: Callable[[str], RunRecord | None],
        start: Callable[[RunRecord], bool],
    ) -> None:
        self.background = Slots(limit, live=live, start=start)
        self.foreground = (
            None
            if foreground is None
            else Slots(foreground, live=live, start=start, governs=_foreground_child)
        )

    def _pool(self, record: RunRecord) -> Slots:
        if self.foreground is not None and self.foreground.governs(record):
            return self.foreground
        return self.background

    def must_queue(self, record: RunRecord) -> bool:
        return self._pool(record).must_queue(record)

    def place(self, record: RunRecord) -> bool:
        return self._pool(record).place(record)

    def position(self, record: RunRecord) -> int | None:
        return self._pool(record).position(record)

    def dequeue(self, record: RunRecord) -> bool:
        return self._pool(record).dequeue(record)

    def release(self, run_id: str) -> None:
        self.background.release(run_id)
        if self.foreground is not None:
            self.foreground.release(run_id)

    @contextlib.asynccontextmanager
    async def lending(self, caller: str | None) -> AsyncIterator[None]:
        async with self.background.lending(caller):
            if self.foreground is None:
                yield
                return
            async with self.foreground.lending(caller):
                yield
