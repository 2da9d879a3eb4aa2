"""``DbosProvider``: children as DBOS workflows on a queue, driven by ``membrane worker``.

A host whose settings say ``provider = "dbos"`` builds and publishes each child as any start
does (capability gate, depth, resolution, receipt, header, ``published`` event); the child is
then a DBOS workflow whose id is its run id, enqueued on the queue ``settings.queue_name``.
Any node's ``membrane worker`` dequeues it and drives it from its stored header and
conversation (the resume path, with no new message), holding the run's lease, and records its
end. The host holds no lease on it (``SubagentCapabilities.queued``) and follows its end in
the store: ``_QueuedChild.run`` reads the run's header every ``poll`` seconds (0.1 s by
default: the bound on how late a host hears of an end) until the run has ended.

Exactly once: the workflow is enqueued by ``create()``, before publication, under the run id;
DBOS answers a repeated id from its record, and a repeated ``request_id`` replays the start's
receipt, so neither makes a second child. A start that fails after ``create()`` cancels its
workflow (``discard``); a worker that dequeues a workflow whose run was never published waits
a bounded time for it and ends without a child.

``stop()`` cancels the workflow: the worker driving the run sees that and stops it, and its
end (``stopped``) reaches the host as any end does. A host that closes leaves its queued runs
to the fleet (``leave``): they go on without it.

``queue_database(state)`` is where DBOS keeps its queue: the PostgreSQL database of the state
itself (schema ``dbos``), or, for a SQLite state file, a SQLite file beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio

from membrane.durable.owners import judge
from membrane.durable.runs import RunResult
from membrane.errors import QueueUnavailable
from membrane.loop.outcome import ChildOutcome
from membrane.models.base import Message
from membrane.runtime.provider import ChildSpec, SetupCallback, SubagentCapabilities
from membrane.store.base import Store
from membrane.store.urls import is_postgres_url, redact_url
from membrane.tools.scope import Scope
from membrane.vocabulary import END_STATES

if TYPE_CHECKING:
    from dbos import DBOSClient

__all__ = [
    "APP_VERSION",
    "WORKFLOW_NAME",
    "DbosProvider",
    "on_queue",
    "queue_database",
    "queue_report",
]

#: The name every node registers the drive workflow under, and the host enqueues.
WORKFLOW_NAME: Final = "membrane.drive"
#: One application version across the fleet: a worker dequeues only its own version's work.
APP_VERSION: Final = "membrane-1"
#: How often a host reads the header of a run it follows (seconds).
POLL_SECONDS: Final = 0.1


def queue_database(state: str | Path) -> str:
    """The DBOS system database URL for the state ``state`` (a path or a database URL)."""
    text = str(state)
    if is_postgres_url(text):
        return text
    path = Path(text).expanduser().resolve()
    return f"sqlite:///{path.with_name(path.stem + '.queue.db')}"


def on_queue(store: Store, state: str | Path, *, queue: str = "membrane") -> DbosProvider:
    """The ``dbos`` provider of a deployment whose state ``store`` was opened from ``state``
    (a file or a ``postgresql://`` URL): its queue database is the state's own."""
    return DbosProvider(store, url=queue_database(state), queue=queue)


def redacted(url: str) -> str:
    """``url`` as messages show it: a database's password masked."""
    return redact_url(url) if is_postgres_url(url) else url


def open_client(url: str, *, queue: str) -> DBOSClient:
    """A DBOS client on the system database ``url`` (``QueueUnavailable`` when unreachable)."""
    try:
        from dbos import DBOS, DBOSClient
    except ImportError as exc:  # pragma: no cover - dbos is a declared dependency
        raise QueueUnavailable(
            "provider = 'dbos' needs the dbos package (pip install 'membrane[dbos]')",
            queue=queue,
            cause="dbos-not-installed",
        ) from exc
    try:
        # The queue's tables, made when missing (what a worker's launch does too).
        DBOS.migrate(url)
        return DBOSClient(system_database_url=url, retry_connection_errors=False)
    except Exception as exc:
        raise QueueUnavailable(
            f"the queue database {redacted(url)} cannot be reached: {type(exc).__name__}",
            queue=queue,
            cause=type(exc).__name__,
        ) from None


def queue_report(url: str, *, queue: str) -> dict[str, Any]:
    """What ``membrane doctor`` says of the queue at ``url``, read only: whether its database
    answers and is prepared, how many children wait and run, and the workers running them,
    each ``alive``, ``gone`` or ``unknown`` as judged from this machine (``durable.owners``)."""
    from dbos import DBOSClient

    report: dict[str, Any] = {"database": redacted(url), "queue": queue, "reachable": False}
    path = url.removeprefix("sqlite:///")
    if path != url and not Path(path).exists():
        report["error"] = "no queue database yet: no worker has started on this state"
        return report
    try:
        client = DBOSClient(system_database_url=url, retry_connection_errors=False)
    except Exception as exc:
        report["error"] = f"{type(exc).__name__}: {_first_line(exc)}"
        return report
    report["reachable"] = True
    try:
        listed = {
            status: client.list_workflows(
                status=status, queue_name=queue, load_input=False, load_output=False
            )
            for status in ("ENQUEUED", "PENDING")
        }
    except Exception as exc:
        report["error"] = f"{type(exc).__name__}: {_first_line(exc)}"
        return report
    finally:
        client.destroy()
    running: dict[str, int] = {}
    for workflow in listed["PENDING"]:
        executor = workflow.executor_id or "unknown"
        running[executor] = running.get(executor, 0) + 1
    report["waiting"] = len(listed["ENQUEUED"])
    report["running"] = len(listed["PENDING"])
    report["workers"] = [
        {"worker": worker, "runs": count, "state": judge(worker)}
        for worker, count in sorted(running.items())
    ]
    return report


class DbosProvider:
    """Publishes each child here and enqueues it for ``membrane worker`` (module docstring).

    The controls a worker honours are those the stored header carries (persona, tool filter,
    the caller's role, depth); a ``response_schema`` is not stored, so it is refused here.
    """

    name = "dbos"
    capabilities = SubagentCapabilities(
        persona=True, tool_filter=True, depth_limit=True, structured_output=False, queued=True
    )

    def __init__(
        self,
        store: Store,
        *,
        url: str,
        queue: str = "membrane",
        poll: float = POLL_SECONDS,
        client: DBOSClient | None = None,
    ) -> None:
        self.store = store
        self.url = url
        self.queue = queue
        self.poll = poll
        self._client = client

    @property
    def client(self) -> DBOSClient:
        """The DBOS client, opened on first use."""
        if self._client is None:
            self._client = open_client(self.url, queue=self.queue)
        return self._client

    def enqueue(self, run_id: str) -> None:
        """Put run ``run_id`` on the queue (a no-op when its workflow exists already)."""
        try:
            self.client.enqueue(
                {
                    "queue_name": self.queue,
                    "workflow_name": WORKFLOW_NAME,
                    "workflow_id": run_id,
                    "app_version": APP_VERSION,
                },
                run_id,
            )
        except QueueUnavailable:
            raise
        except Exception as exc:
            raise QueueUnavailable(
                f"run {run_id!r} could not be put on queue {self.queue!r} at "
                f"{redacted(self.url)}: {type(exc).__name__}: {_first_line(exc)}; is a "
                "`membrane worker` running on this state (it prepares the queue)?",
                queue=self.queue,
                cause=type(exc).__name__,
            ) from None

    def cancel(self, run_id: str) -> None:
        """Cancel run ``run_id``'s workflow: a worker driving it stops it."""
        self.client.cancel_workflow(run_id)

    def handoff(self, run_id: str) -> bool:
        """Queue run ``run_id``'s workflow again (its driver stopped renewing its lease), so
        that another worker goes on with it; ``False`` when the run has no workflow."""
        return hand_off(self.client, run_id, queue=self.queue)

    def close(self) -> None:
        if self._client is not None:
            self._client.destroy()
            self._client = None

    async def create(self, request: ChildSpec, setup: SetupCallback) -> _QueuedChild:
        scope = Scope(request.registry, name=f"agent:{request.run_id}")
        setup(scope)
        await anyio.to_thread.run_sync(self.enqueue, request.run_id)
        return _QueuedChild(self, scope, request.run_id)


def hand_off(client: Any, run_id: str, *, queue: str) -> bool:
    """Queue the workflow of run ``run_id`` again on ``queue`` (``client``: a ``DBOSClient``),
    for a run that has not ended: nothing while it waits there, ``resume_workflow`` when a
    worker had taken it, and a new workflow under the same id when the last one finished
    without ending the run (a worker that gave the run up); ``False`` when there is none."""
    from dbos import error

    try:
        status = client.retrieve_workflow(run_id).get_status()
    except error.DBOSNonExistentWorkflowError:
        return False
    if status.status in ("SUCCESS", "ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
        client.delete_workflow(run_id)
        client.enqueue(
            {
                "queue_name": queue,
                "workflow_name": WORKFLOW_NAME,
                "workflow_id": run_id,
                "app_version": APP_VERSION,
            },
            run_id,
        )
    elif status.status != "ENQUEUED":
        client.resume_workflow(run_id, queue_name=queue)
    return True


class _QueuedChild:
    """A child a worker drives; this side follows its end in the store."""

    __slots__ = ("_left", "_provider", "_run_id", "_scope", "_stopped")

    def __init__(self, provider: DbosProvider, scope: Scope, run_id: str) -> None:
        self._provider = provider
        self._scope = scope
        self._run_id = run_id
        self._stopped = False
        self._left = anyio.Event()

    @property
    def scope(self) -> Scope:
        return self._scope

    async def run(self) -> ChildOutcome:
        store, poll = self._provider.store, self._provider.poll
        while True:
            header = store.get_header(self._run_id)
            if header is not None and header.status in END_STATES and header.result is not None:
                return RunResult.from_dict(header.result).outcome
            with anyio.move_on_after(poll):
                await self._left.wait()
            if self._left.is_set():
                # The host closes; the run goes on in the fleet without it.
                return ChildOutcome(status="stopped")

    def steer(self, message: str) -> bool:
        return False

    def notify(self, message: str, *, on_delivered: Callable[[], None] | None = None) -> bool:
        return False

    def discard(self) -> None:
        """The start failed after the workflow was enqueued: cancel it."""
        self._provider.cancel(self._run_id)

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._provider.cancel(self._run_id)

    def leave(self) -> None:
        """Stop following the run here (the host closes); it goes on in the fleet."""
        self._left.set()

    def messages(self) -> Sequence[Message]:
        return ()


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
