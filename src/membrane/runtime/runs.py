"""The runtime's record of each published child, and the one owner of the live runs.

``RunRecord`` is mutable and never handed out; ``RunInfo`` and ``RunResult`` (its snapshots) are
in ``membrane.durable.runs``. ``LiveRuns`` holds every published run of one runtime; the
durable parts read it through ``membrane.durable.runs.RunsTable``.

Statuses of a run: ``queued`` (published, waiting for a background slot), ``running``, then one
of the loop's end states: ``completed``, ``wrapped_up``, ``stopped``, ``aborted``, ``error``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from uuid import uuid4

import anyio

from membrane.durable.runs import RunInfo, RunResult
from membrane.errors import MembraneError
from membrane.json_types import JSONObject
from membrane.loop.outcome import ChildOutcome
from membrane.models.base import Usage
from membrane.resolve.ceiling import Ceiling
from membrane.runtime.budget import RunSpending
from membrane.runtime.events import EventHub
from membrane.runtime.provider import ProviderChild
from membrane.runtime.worktree import Worktree
from membrane.store.base import Lease, SessionHeader
from membrane.vocabulary import OK_STATES

__all__ = ["OWNER_KEY", "LiveRuns", "RunRecord", "event_kind"]

#: The header ``meta`` key naming the runtime that last published a run (``LiveRuns.owner``):
#: how a runtime finds its own runs in the store once they have left memory.
OWNER_KEY: Final = "runtime"


def event_kind(status: str) -> str:
    """The lifecycle event that reports an end status."""
    if status in OK_STATES:
        return "completed"
    if status == "error":
        return "error"
    return "stopped"


#: A run under no ceiling, passing none down.
_NO_CEILING = Ceiling()


@dataclass(eq=False, slots=True)
class RunRecord:
    """The runtime's mutable record of one published child (never handed out)."""

    run_id: str
    agent: str
    agent_type: str
    parent_id: str | None
    depth: int
    background: bool
    provider: str
    child: ProviderChild
    system: str = ""
    model: str | None = None
    permission_mode: str = "default"
    role: str | None = None
    cwd: str | None = None
    #: Whether its sandboxed commands may use the network (``ChildSpec.network``), and the
    #: variables every process it starts gets (its ``MEMBRANE_TOKEN`` among them): what
    #: ``call_context`` gives a call made for it from outside its loop.
    network: bool | None = None
    #: Its definition's own read roots (``ChildSpec.read_paths``).
    read_paths: tuple[Path, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    worktree: Worktree | None = None
    #: The child's ``# Skills`` catalog (what an inheriting grandchild receives), or ``None``.
    skills: Mapping[str, str] | None = None
    #: The ceiling this run passes to its children (DESIGN rule 13): the one it runs under,
    #: lowered by its own mode, denials and start request.
    ceiling: Ceiling = _NO_CEILING
    #: ``full_tooling`` (the child reaches Membrane's actions) or ``fallback`` (only its own
    #: tools), as decided at its start (``runtime.environment.capability_mode``).
    capability_mode: str = "full_tooling"
    #: The lease this runtime drives it under (claimed at publication or resume): the fence
    #: of its transcript and end writes (``durable.fencing``).
    lease: Lease | None = None
    #: Driven by another process (a provider that advertises ``queued``): this runtime holds
    #: no lease on it and records none of its end (``Finisher``), which its driver writes.
    queued: bool = False
    status: str = "queued"
    stop_requested: bool = False
    #: Launched at its publication's commit (``acknowledge="commit"``): its task awaits the
    #: store's durability barrier before the child runs.
    unsynced: bool = False
    has_edge: bool = False
    #: How many transcript messages the store holds, as far as this process wrote them.
    stored_messages: int = 0
    #: Waits of the parent on this run now in progress (``TaskWait``, a foreground ``Task``).
    parent_waits: int = 0
    #: The outbox item of this run's completion notice, until delivered or settled by a wait.
    outbox_item: int | None = None
    #: Items this run's own waits returned, each with the length its conversation had then:
    #: delivered once the store holds more of its transcript than that (``append_transcript``).
    #: A tuple (few items, replaced whole): nothing for the collector to follow until then.
    settled: tuple[tuple[int, int], ...] = ()
    #: The ids of the children it started: ``()`` until the first (``add_child``).
    children: list[str] | tuple[()] = ()
    #: The budgets the run draws on (``None``: none), and the error a budget ended it with.
    spending: RunSpending | None = None
    ended_by: MembraneError | None = None
    result: RunResult | None = None
    #: Its open ``AskParent`` question (``{"id", "text"}``) while it waits for the answer.
    question: JSONObject | None = None
    #: The store could not write the run's end: the record stays the one truth of it.
    end_unstored: bool = False
    #: ``done``'s event, made by its first waiter (most runs have none), and whether the run
    #: has ended (``mark_done``).
    _done: anyio.Event | None = field(default=None, init=False, repr=False)
    _ended: bool = field(default=False, init=False, repr=False)

    @property
    def finished(self) -> bool:
        return self.result is not None

    @property
    def delivered(self) -> bool:
        """The run has ended and its end reached its waiters (``mark_done``)."""
        return self._ended

    @property
    def done(self) -> anyio.Event:
        """Set once the run has ended and its end is delivered (``mark_done``)."""
        event = self._done
        if event is None:
            event = anyio.Event()
            if self._ended:
                event.set()
            else:
                self._done = event
        return event

    def mark_done(self) -> None:
        """The run has ended: wake its waiters, and any that come later at once (each with an
        event of its own, already set: the record keeps none)."""
        self._ended = True
        event = self._done
        if event is not None:
            self._done = None
            event.set()

    def add_child(self, run_id: str) -> None:
        children = self.children
        if isinstance(children, list):
            children.append(run_id)
        else:
            self.children = [run_id]

    def info(self, *, queue_position: int | None = None) -> RunInfo:
        return RunInfo(
            run_id=self.run_id,
            agent=self.agent,
            agent_type=self.agent_type,
            parent_id=self.parent_id,
            depth=self.depth,
            status=self.status,
            background=self.background,
            provider=self.provider,
            queue_position=queue_position,
            result=self.result,
            question=None if self.result is not None else self.question,
        )

    def result_of(
        self,
        outcome: ChildOutcome,
        *,
        worktree: Mapping[str, Any] | None,
        descendants: Usage | None = None,
        descendants_cost: int | None = 0,
    ) -> RunResult:
        """The result of this run; ``usage_total`` adds ``descendants`` to its own usage, and
        ``cost_total`` ``descendants_cost`` (micro-dollars; ``None``, unknown, stays so)."""
        total = outcome.usage + (descendants or Usage())
        cost = outcome.cost
        return RunResult(
            run_id=self.run_id,
            agent=self.agent,
            outcome=outcome,
            worktree=worktree,
            usage_total=total,
            cost_total=None
            if cost is None or descendants_cost is None
            else cost + descendants_cost,
        )


class LiveRuns:
    """The one owner of one runtime's runs held in memory, in start order.

    Publication adds a run (``register``); a run leaves once it has ended and nothing here can
    ask for it any more (``ended``): a top-level run, or a child whose parent has ended, at
    its end; a child of a running parent when that parent ends (the parent's waits, its
    ``TaskList`` and its subtree's usage read it until then). The store holds every run: a
    lookup of one that left reads its header. durable/ reads it as a ``RunsTable``.
    """

    __slots__ = ("_hub", "_runs", "owner")

    def __init__(self, hub: EventHub) -> None:
        self._hub = hub
        self._runs: dict[str, RunRecord] = {}
        #: This runtime's id, written under ``OWNER_KEY`` in the header of each run it publishes.
        self.owner: str = uuid4().hex

    def owns(self, header: SessionHeader) -> bool:
        """Whether this runtime published (or last resumed) the stored run ``header``."""
        return header.meta.get(OWNER_KEY) == self.owner

    def live(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id) if isinstance(run_id, str) else None

    def records(self) -> list[RunRecord]:
        return list(self._runs.values())

    def __len__(self) -> int:
        return len(self._runs)

    def running(self) -> bool:
        """Whether a run held here has not ended."""
        return any(not record.finished for record in self._runs.values())

    def ended(self, record: RunRecord) -> None:
        """``record`` has ended and its end is delivered: its ended children leave memory (only
        it could ask for them), and so does it unless a running parent may still ask for it.
        A run whose end the store did not take stays (``end_unstored``): the store still says
        it is running, and only this record knows better."""
        runs = self._runs
        for child_id in record.children:
            child = runs.get(child_id)
            if child is not None and child.delivered and not child.end_unstored:
                del runs[child_id]
        parent = runs.get(record.parent_id) if record.parent_id is not None else None
        if not record.end_unstored and (parent is None or parent.finished):
            runs.pop(record.run_id, None)

    def tool_arguments(self, run_id: str, call_id: str) -> JSONObject | None:
        """The arguments of tool call ``call_id`` in live run ``run_id``'s conversation."""
        record = self._runs.get(run_id)
        if record is None:
            return None
        for message in reversed(record.child.messages()):
            for call in message.tool_calls:
                if call.id == call_id:
                    return call.arguments
        return None

    def tool_result(self, run_id: str, call_id: str) -> str | None:
        """The text of tool call ``call_id``'s result in live run ``run_id``'s conversation."""
        record = self._runs.get(run_id)
        if record is None:
            return None
        for message in reversed(record.child.messages()):
            if message.role == "tool" and message.tool_call_id == call_id:
                return message.content
        return None

    def register(self, record: RunRecord, *, seq: int, data: Mapping[str, Any]) -> None:
        """List a child whose publication committed (as ``seq``), and announce it."""
        self._runs[record.run_id] = record
        parent = self._runs.get(record.parent_id) if record.parent_id else None
        if parent is not None:
            parent.add_child(record.run_id)
        self._hub.deliver(
            seq=seq,
            run_id=record.run_id,
            parent_id=record.parent_id,
            agent=record.agent,
            kind="published",
            data=data,
        )
