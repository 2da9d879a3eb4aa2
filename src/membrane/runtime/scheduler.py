"""Where the runs of one runtime run: its task groups, the gate that closes them, and stops.

``Scheduler`` owns the task group the children are driven in (each child's task spawned beside
it, ``ChildTasks``), an outer group for the services that must outlast every run (the event
writer, the outbox drainer, the sweeper), the ``Slots`` that bound the background runs, and the
closing flag. Opening starts the services; closing first refuses every new start
(``check_publishable``), asks every run to stop, joins them, then shuts the services down.

A child is scheduled (``launch``) in the same synchronous step as the ``check_publishable``
that preceded its publication, so the group is still open when it is placed. A stop asked of a
queued run drives it to its end at once (it never started); a running one is told to stop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine, Sequence
from types import TracebackType

import anyio
from anyio.abc import TaskGroup

from membrane.errors import InvalidRequest, StoreError
from membrane.runtime.child_tasks import ChildTasks, running_loop
from membrane.runtime.events import EventHub
from membrane.runtime.provider import QueuedChild
from membrane.runtime.runs import LiveRuns, RunRecord
from membrane.runtime.slots import SlotPools
from membrane.store.base import Store
from membrane.vocabulary import END_STATES

__all__ = ["Scheduler"]


class Scheduler:
    """The task groups, slots and closing gate of one runtime.

    ``drive(record)`` runs a child to its end (``Finisher.drive``); ``limit`` is
    ``settings.max_concurrency``.
    """

    def __init__(
        self,
        store: Store,
        *,
        hub: EventHub,
        runs: LiveRuns,
        limit: int,
        foreground_limit: int | None = None,
        drive: Callable[[RunRecord], Coroutine[object, object, None]],
    ) -> None:
        self._store = store
        self._hub = hub
        self._runs = runs
        self._drive = drive
        self.slots = SlotPools(
            limit, foreground=foreground_limit, live=runs.live, start=self._start_queued
        )
        self.closing = False
        self._group: TaskGroup | None = None
        self._children: ChildTasks | None = None
        self._writers: TaskGroup | None = None

    @property
    def opened(self) -> bool:
        """Whether the groups are open (between ``open`` and ``close``)."""
        return self._group is not None

    def check_unopened(self) -> None:
        """Refuse a second opening: a runtime opens once."""
        if self._group is not None or self._hub.closed:
            raise InvalidRequest("a SubagentRuntime opens once; build a new one to run again")

    async def open(self, services: Sequence[Callable[[], Coroutine[object, object, None]]]) -> None:
        """Open the groups and start ``services`` in the outer one, so they outlast every run."""
        self.check_unopened()
        loop = running_loop()  # before anything opens: asyncio only
        writers = anyio.create_task_group()
        await writers.__aenter__()
        for service in services:
            writers.start_soon(service)
        group = anyio.create_task_group()
        await group.__aenter__()
        self._writers, self._group = writers, group
        self._children = ChildTasks(group, loop)

    async def close(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        *,
        shutdown: Callable[[], None],
    ) -> bool | None:
        """Refuse new starts, stop every run and join them, then ``shutdown()`` the services
        and join them. The host's own error propagates as itself, not wrapped in a group."""
        # First: from here on no start publishes a child, so every run is asked to stop below.
        self.closing = True
        group, children = self._group, self._children
        if group is None or children is None:
            return None
        for record in self._runs.records():
            if record.queued and isinstance(record.child, QueuedChild):
                record.child.leave()  # driven by a worker: it goes on without this runtime
            else:
                self.request_stop(record)
        try:
            failed: BaseExceptionGroup[BaseException] | None = None
            try:
                await children.join()
            except BaseExceptionGroup as group_error:
                failed = group_error
            self._children = None
            swallowed: bool | None = None
            if exc is None or isinstance(exc, anyio.get_cancelled_exc_class()):
                swallowed = await group.__aexit__(exc_type, exc, tb)
            else:
                # The children were asked to stop and are joined first.
                await group.__aexit__(None, None, None)
            if failed is not None:
                raise failed
            return swallowed
        finally:
            self._group = None
            shutdown()
            # The writer returns at once now that the hub is closed.
            writers, self._writers = self._writers, None
            if writers is not None:
                await writers.__aexit__(None, None, None)

    def require_open(self) -> None:
        """Refuse a start or a message while the runtime is not open (or closing)."""
        if self.closing and self._group is not None:
            raise InvalidRequest("the runtime is closing; no new child is started")
        if self._group is None:
            raise InvalidRequest(
                "the runtime is not open; use `async with SubagentRuntime(...) as runtime:`"
            )

    def check_publishable(self, parent_id: str | None) -> None:
        """Refuse to publish a child now: the runtime is closing, or its parent ended or is
        stopping. The start path calls it in the synchronous step that commits and registers
        the child, so nothing can change between this check and the child being scheduled.
        The refusal is ``InvalidRequest`` with ``transient: true``: the runtime's state refused
        the start, not the request, so its receipt is released."""
        if self.closing or self._group is None:
            raise InvalidRequest(
                "the runtime is closing; no new child is started (nothing was published)",
                transient=True,
            )
        parent = self._runs.live(parent_id) if parent_id is not None else None
        state: str | None = None
        if parent is not None and (parent.finished or parent.stop_requested):
            state = parent.status if parent.finished else "stopping"
        elif parent is None and parent_id is not None:
            # An ended run of this runtime has left memory; its stored header says it ended.
            header = self._store.get_header(parent_id)
            if header is not None and self._runs.owns(header) and header.status in END_STATES:
                state = header.status
        if state is not None:
            raise InvalidRequest(
                f"run {parent_id!r} has ended or is stopping ({state}); a child of it would be "
                "orphaned, so nothing was published",
                parent_id=parent_id,
                transient=True,
            )

    def launch(self, record: RunRecord) -> None:
        """Schedule a child the start path just published. No ``await`` separates this from
        the ``check_publishable`` that preceded publication, so the task group is still open."""
        children = self._children
        assert children is not None and not self.closing
        if self.slots.place(record):
            children.spawn(self._drive, record)

    def stop_run(self, run_id: str) -> None:
        """Ask the live run ``run_id`` (if any) to stop."""
        record = self._runs.live(run_id)
        if record is not None:
            self.request_stop(record)

    def request_stop(self, record: RunRecord) -> None:
        """Ask ``record`` to stop: a queued run is driven to its end at once (it never started),
        a running one is told to stop. Asking twice, or after the end, does nothing."""
        if record.finished or record.stop_requested:
            return
        record.stop_requested = True
        if self.slots.dequeue(record):
            if self._children is not None:
                self._children.spawn(self._drive, record)
            return
        record.child.stop()

    def _start_queued(self, record: RunRecord) -> bool:
        """Start a queued run the slots just admitted; ``False`` once the group is gone."""
        children = self._children
        if children is None:
            return False
        record.status = "running"
        with contextlib.suppress(StoreError):
            self._hub.commit(lambda: self._store.set_status(record.run_id, "running"))
        children.spawn(self._drive, record)
        return True
