"""``Worker``: one node's share of the queue (``membrane worker``).

A worker is a ``SubagentRuntime`` on the deployment's shared state (its children run in this
process) plus a DBOS executor listening to the queue. Each workflow it dequeues names a run a
host published (``DbosProvider``); the worker drives it from its stored header and
conversation (``SubagentRuntime.take``: the resume path with no new message), which claims the
run's lease, renews it while the run goes on, and records the run's end. The workflow ends
with the run's status.

What a workflow does when the run is not there to drive:

* never published (the host's start failed or the host died between enqueueing and
  publishing): it waits ``PUBLISH_WAIT`` seconds for the header, then ends without a child;
* already ended (a repeat of a finished workflow): it answers the stored status;
* leased by a live process (a hand-off raced the end of the old lease): it waits for the
  lease, up to one lease's lifetime, then leaves the run to its holder.

A workflow cancelled through DBOS (``DbosProvider.stop``) stops its run. The runtime's sweeper
hands a run whose worker stopped renewing its lease back to the queue (``handoff``:
``DBOS.resume_workflow``), so a dead node's runs go on elsewhere; a late write of the stalled
worker is refused by the lease's fence.

DBOS is one per process, so the workflow function is a module-level function reaching the
process's one ``Worker`` (``_current``); its body runs on DBOS's thread pool and hands the run
to the worker's event loop through an anyio portal.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any, Final

import anyio
from anyio.from_thread import BlockingPortal
from dbos import DBOS, DBOSClient

from membrane.durable.owners import gone
from membrane.errors import (
    InvalidRequest,
    MembraneError,
    QueueUnavailable,
    RunLeased,
    UnknownRun,
)
from membrane.runtime.providers.dbos import (
    APP_VERSION,
    WORKFLOW_NAME,
    hand_off,
    open_client,
    redacted,
)
from membrane.runtime.runtime import SubagentRuntime
from membrane.vocabulary import END_STATES

__all__ = ["PUBLISH_WAIT", "Worker", "drive", "handoff"]

#: Seconds a dequeued run's header is awaited before the workflow ends without a child.
PUBLISH_WAIT: Final = 30.0
#: How often a worker looks at a run's workflow for a cancel, and for a header (seconds).
_POLL: Final = 0.2
#: How often the queue is polled for work (seconds).
QUEUE_POLL: Final = 0.25

_current: Worker | None = None
_log = logging.getLogger("membrane.worker")


@DBOS.workflow(name=WORKFLOW_NAME, max_recovery_attempts=1_000_000)
def drive(run_id: str) -> str:
    """The workflow of one run: drive it here to its end; return its status."""
    worker = _current
    if worker is None or worker.portal is None:
        raise QueueUnavailable("this process runs no Membrane worker", queue="", cause="none")
    status: str = worker.portal.call(worker.drive, run_id)
    return status


class Worker:
    """Drains ``queue`` at ``url`` with ``runtime`` (not yet open: ``serve`` opens it once
    DBOS runs, and its sweeper hands lost runs back through ``handoff``), ``concurrency`` runs
    at a time here; ``global_concurrency`` and ``limiter`` are the fleet-wide limits the queue
    carries (``settings.queue_concurrency``, ``queue_rate_limit`` per ``queue_rate_period``)."""

    def __init__(
        self,
        runtime: SubagentRuntime,
        *,
        url: str,
        queue: str = "membrane",
        concurrency: int = 10,
        global_concurrency: int | None = None,
        limiter: dict[str, float] | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.runtime = runtime
        self.url = url
        self.queue = queue
        self.concurrency = concurrency
        self.global_concurrency = global_concurrency
        self.limiter = limiter
        self.portal: BlockingPortal | None = None
        self._open = anyio.Event()
        self._client: DBOSClient | None = None
        self._draining = anyio.Event()
        self._say = on_event or (lambda event: None)

    @property
    def draining(self) -> bool:
        return self._draining.is_set()

    @property
    def owner(self) -> str:
        """Who holds the leases of the runs this worker drives (its DBOS executor id too)."""
        return self.runtime.sweeper.owner

    def drain(self) -> None:
        """Take no more work; ``serve`` returns once the runs driven here have ended."""
        self._draining.set()

    async def serve(self, *, ready: Callable[[], None] | None = None) -> None:
        """Launch DBOS on the queue and drive what it hands over until ``drain()`` (then the
        runs here end, and it returns) or until cancelled."""
        global _current
        if _current is not None:
            raise QueueUnavailable("one worker per process", queue=self.queue, cause="busy")
        async with BlockingPortal() as portal:
            self.portal = portal
            _current = self
            try:
                await anyio.to_thread.run_sync(self._launch)
                async with self.runtime, anyio.create_task_group() as group:
                    self._open.set()
                    group.start_soon(self._recover_forever)
                    self._say(
                        {
                            "event": "ready",
                            "worker": self.owner,
                            "queue": self.queue,
                            "database": redacted(self.url),
                            "concurrency": self.concurrency,
                        }
                    )
                    if ready is not None:
                        ready()
                    await self._draining.wait()
                    await anyio.to_thread.run_sync(_destroy)  # no more work is dequeued here
                    self._say({"event": "draining"})
                    while self.runtime.busy():
                        await anyio.sleep(_POLL)
                    group.cancel_scope.cancel()
            finally:
                _current = None
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_destroy)
                    if self._client is not None:
                        await anyio.to_thread.run_sync(self._client.destroy)
                self.portal = None

    def _launch(self) -> None:
        config: dict[str, Any] = {
            "name": "membrane",
            "system_database_url": self.url,
            "executor_id": self.owner,
            "application_version": APP_VERSION,
            "log_level": "WARNING",
        }
        try:
            DBOS(config=config)  # type: ignore[arg-type]
            DBOS.listen_queues([self.queue])
            DBOS.launch()
            DBOS.register_queue(
                self.queue,
                worker_concurrency=self.concurrency,
                global_concurrency=self.global_concurrency,
                limiter=self.limiter,  # type: ignore[arg-type]
                polling_interval_sec=QUEUE_POLL,
                on_conflict="always_update",
            )
        except QueueUnavailable:
            raise
        except Exception as exc:
            raise QueueUnavailable(
                f"the queue database {redacted(self.url)} cannot be used: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
                queue=self.queue,
                cause=type(exc).__name__,
            ) from None

    async def drive(self, run_id: str) -> str:
        """Drive run ``run_id`` to its end here (see the module docstring); its status. A
        failure is told (``failed``) and ends this workflow alone, never the worker."""
        try:
            return await self._drive(run_id)
        except Exception as exc:
            error = exc.to_dict() if isinstance(exc, MembraneError) else None
            code = error["code"] if error is not None else type(exc).__name__
            self._say({"event": "failed", "run_id": run_id, "error": str(code)})
            return "failed"

    async def _drive(self, run_id: str) -> str:
        await self._open.wait()
        store = self.runtime.store
        deadline = time.monotonic() + PUBLISH_WAIT
        header = store.get_header(run_id)
        while header is None and time.monotonic() < deadline:
            await anyio.sleep(_POLL)
            header = store.get_header(run_id)
        if header is None:
            self._say({"event": "unpublished", "run_id": run_id})
            return "unpublished"
        if header.status in END_STATES:
            return header.status
        refused = await self._take(run_id)
        if refused is not None:
            return refused
        self._say({"event": "driving", "run_id": run_id, "agent": header.agent})
        while True:
            with anyio.move_on_after(_POLL):
                try:
                    result = await self.runtime.wait(run_id)
                except UnknownRun:
                    # It ended here and left memory, and its header names another driver:
                    # this process lost its lease (a stall) and the run moved on.
                    self._say({"event": "lost", "run_id": run_id})
                    return "lost"
                ended: dict[str, Any] = {"event": "ended", "run_id": run_id}
                ended["status"] = result.status
                if result.error is not None:
                    ended["error"] = result.error.get("code")
                self._say(ended)
                return result.status
            if await anyio.to_thread.run_sync(self._cancelled, run_id):
                await self.runtime.stop(run_id)

    async def _recover_forever(self) -> None:
        """Every sweep interval, ``recover()``; a failure is told and tried again."""
        while True:
            try:
                await self.recover()
            except Exception as exc:
                self._say({"event": "recovery-failed", "error": f"{type(exc).__name__}: {exc}"})
            await anyio.sleep(self.runtime.settings.sweep_interval_seconds)

    async def recover(self) -> list[str]:
        """Queue again the workflows a dead worker of this host had dequeued before it took
        their runs (no lease, so no sweep sees them); their run ids."""
        pending = await anyio.to_thread.run_sync(self._pending_elsewhere)
        store, again = self.runtime.store, []
        for run_id, executor in pending:
            header = store.get_header(run_id)
            if header is not None and header.status in END_STATES:
                continue
            # Still `queued`: it was never taken (a taken run's lease is the sweeper's part).
            if header is not None and header.status == "queued" and gone(executor):
                await anyio.to_thread.run_sync(self._hand_off, run_id)
                again.append(run_id)
                self._say({"event": "requeued", "run_id": run_id, "worker": executor})
        return again

    def _pending_elsewhere(self) -> list[tuple[str, str]]:
        found = self.client.list_workflows(
            status="PENDING", queue_name=self.queue, load_input=False, load_output=False
        )
        return [
            (status.workflow_id, status.executor_id or "")
            for status in found
            if status.executor_id and status.executor_id != self.owner
        ]

    def _hand_off(self, run_id: str) -> None:
        hand_off(self.client, run_id, queue=self.queue)

    async def _take(self, run_id: str) -> str | None:
        """Take the run's lease and publish it here (``None``), or the status it ended with
        meanwhile. While another live process holds it (a hand-off raced the end of the old
        lease), or a stale run of this process has not ended yet, it waits: the workflow ends
        only once the run has (a workflow that ended first would leave the run to no one)."""
        while True:
            try:
                await self.runtime.take(run_id)
                return None
            except RunLeased:
                pass
            except InvalidRequest as exc:
                status = exc.data.get("status")
                if status is None:
                    raise
                if status in END_STATES:
                    return str(status)
            await anyio.sleep(_POLL)

    def _cancelled(self, run_id: str) -> bool:
        status = self.client.retrieve_workflow(run_id).get_status()
        return status.status == "CANCELLED"

    @property
    def client(self) -> DBOSClient:
        """A DBOS client on the queue database: what this worker reads and asks of the queue
        outside a workflow step (DBOS's own calls would record steps of the workflow that
        made them, which a hand-off takes away from this process)."""
        if self._client is None:
            self._client = open_client(self.url, queue=self.queue)
        return self._client


def handoff(url: str, *, queue: str) -> Callable[[str], bool]:
    """The sweeper's ``handoff`` in a worker: queue a run again through a DBOS client on the
    queue database ``url`` (a client, since the sweeper runs on the event loop, where DBOS's
    own synchronous calls are refused)."""
    clients: list[Any] = []

    def again(run_id: str) -> bool:
        if not clients:
            clients.append(open_client(url, queue=queue))
        return hand_off(clients[0], run_id, queue=queue)

    return again


def _destroy() -> None:
    try:
        DBOS.destroy(destroy_registry=False)
    except Exception as exc:  # a worker that never launched has nothing to destroy
        print(f"membrane worker: {type(exc).__name__} while closing the queue", file=sys.stderr)
