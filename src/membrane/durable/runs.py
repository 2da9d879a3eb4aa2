"""What durable/ knows of runs: the snapshots it stores and replays, and the narrow protocol
through which it reads the runtime's live runs.

``RunInfo`` is what listings show; ``RunResult`` is how a run ended (the child's
``ChildOutcome``, unchanged, with the run's id, agent and worktree). Both are immutable, with
``to_dict()`` for tool results and JSON output and a stored form that receipts replay.

``RunsTable`` is the runtime's one owner of live runs, as durable/ sees it: ``live(run_id)``
gives a ``LiveRun``, the few fields the receipts, the outbox and the transcripts read (and the
few they write: ``outbox_item``, ``stored_messages`` and ``settled``). ``EventLog`` is the
runtime's event hub, as durable/ uses it: events written behind, and store work committed with
them. durable/ never imports the runtime; the runtime hands these in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar, cast

from membrane.json_types import JSONDict, JSONObject, JSONValue
from membrane.loop.outcome import ChildOutcome
from membrane.models.base import Message, Usage
from membrane.store.base import Lease, SessionHeader
from membrane.vocabulary import END_STATES, EndStatus

__all__ = ["QUESTION_KEY", "EventLog", "LiveChild", "LiveRun", "RunInfo", "RunResult", "RunsTable"]

T = TypeVar("T")


class LiveChild(Protocol):
    """What durable/ uses of a live run's child (a ``ProviderChild`` is one)."""

    def messages(self) -> Sequence[Message]: ...

    def notify(self, message: str, *, on_delivered: Callable[[], None] | None = None) -> bool: ...


class LiveRun(Protocol):
    """What durable/ reads of one live run, and the two counters it keeps on it."""

    @property
    def run_id(self) -> str: ...

    @property
    def agent(self) -> str: ...

    @property
    def parent_id(self) -> str | None: ...

    @property
    def background(self) -> bool: ...

    @property
    def child(self) -> LiveChild: ...

    @property
    def finished(self) -> bool: ...

    @property
    def stop_requested(self) -> bool: ...

    @property
    def parent_waits(self) -> int: ...

    #: The lease this process drives the run under (``None``: none), which fences its writes.
    @property
    def lease(self) -> Lease | None: ...

    #: The outbox item of this run's completion notice, until delivered or settled by a wait.
    outbox_item: int | None
    #: How many transcript messages the store holds, as far as this process wrote them.
    stored_messages: int
    #: Outbox items this run's own waits returned, each with its conversation's length then;
    #: each is marked delivered with the first transcript write that holds more than that.
    settled: tuple[tuple[int, int], ...]


class RunsTable(Protocol):
    """The runtime's live runs, by id."""

    def live(self, run_id: str) -> LiveRun | None: ...


class EventLog(Protocol):
    """The runtime's event hub: events written behind, store work committed with them."""

    def post(
        self,
        *,
        run_id: str,
        parent_id: str | None,
        agent: str,
        kind: str,
        data: Mapping[str, object],
    ) -> None: ...

    def flush(self, work: Callable[[], None]) -> None: ...

    def commit(self, work: Callable[[], T]) -> T: ...


@dataclass(frozen=True, slots=True)
class RunResult:
    """How one run ended: the child's ``outcome`` as its provider returned it, unchanged, with
    the run's id and agent. ``worktree`` is ``{branch, commit, has_changes}`` for an isolated
    child; ``error`` is ``{"code", "message", "data"}`` when ``status`` is ``error``."""

    run_id: str
    agent: str
    outcome: ChildOutcome
    worktree: JSONObject | None = None
    #: The run's own usage plus that of every descendant that ended before it (DESIGN rule 12).
    usage_total: Usage | None = None
    #: The run's own cost plus its descendants' (as ``usage_total``), in micro-dollars;
    #: ``None`` when any of them is unknown.
    cost_total: int | None = None

    @property
    def status(self) -> EndStatus:
        return self.outcome.status

    @property
    def text(self) -> str:
        return self.outcome.text

    @property
    def turns(self) -> int:
        return self.outcome.turns

    @property
    def usage(self) -> Usage:
        return self.outcome.usage

    @property
    def subtree_usage(self) -> Usage:
        """``usage_total`` when known, else the run's own usage."""
        return self.usage_total if self.usage_total is not None else self.usage

    @property
    def cost(self) -> float | None:
        """What the run's own model responses cost, in US dollars; ``None``: unknown."""
        return _dollars(self.outcome.cost)

    @property
    def subtree_cost(self) -> float | None:
        """What the run and the descendants that ended before it cost, in US dollars;
        ``None``: unknown (a price was missing somewhere in the subtree)."""
        return _dollars(self.cost_total)

    @property
    def error(self) -> JSONObject | None:
        return self.outcome.error

    @property
    def structured(self) -> JSONValue:
        return self.outcome.structured

    @property
    def ok(self) -> bool:
        return self.outcome.ok

    def to_dict(self) -> JSONDict:
        data: JSONDict = {
            "run_id": self.run_id,
            "agent": self.agent,
            "status": self.status,
            "text": self.text,
            "turns": self.turns,
            "usage": self.usage.to_dict(),
            "usage_total": self.subtree_usage.to_dict(),
            "cost": self.cost,
            "cost_total": self.subtree_cost,
        }
        if self.error is not None:
            data["error"] = dict(self.error)
        if self.structured is not None:
            data["structured"] = self.structured
        if self.worktree is not None:
            data["worktree"] = dict(self.worktree)
        return data

    @classmethod
    def from_dict(cls, data: JSONObject) -> RunResult:
        """The result ``to_dict()`` wrote (as the store gives it back)."""
        error, worktree = data.get("error"), data.get("worktree")
        turns, status = data.get("turns"), data.get("status")
        outcome = ChildOutcome(
            status=cast(EndStatus, status) if status in END_STATES else "error",
            text=str(data.get("text") or ""),
            turns=turns if type(turns) is int else 0,
            error=dict(error) if isinstance(error, Mapping) else None,
            structured=data.get("structured"),
            usage=_usage(data.get("usage")) or Usage(),
            cost=_micros(data.get("cost")),
        )
        return cls(
            run_id=str(data.get("run_id", "")),
            agent=str(data.get("agent", "")),
            outcome=outcome,
            worktree=dict(worktree) if isinstance(worktree, Mapping) else None,
            usage_total=_usage(data.get("usage_total")),
            cost_total=_micros(data.get("cost_total")),
        )


#: The header ``meta`` key of a run's open ``AskParent`` question (``{"id", "text", ...}``).
QUESTION_KEY: Final = "question"


def _open_question(value: object) -> JSONObject | None:
    """The ``{"id", "text"}`` of a stored open question, or ``None``."""
    if not isinstance(value, Mapping):
        return None
    qid, text = value.get("id"), value.get("text")
    if not isinstance(qid, str) or not isinstance(text, str):
        return None
    return {"id": qid, "text": text}


def _dollars(micros: int | None) -> float | None:
    return None if micros is None else micros / 1_000_000


def _micros(dollars: object) -> int | None:
    """A stored cost in dollars back in micro-dollars; ``None`` (unknown) for anything else."""
    if isinstance(dollars, bool) or not isinstance(dollars, int | float) or dollars < 0:
        return None
    return round(dollars * 1_000_000)


def _usage(value: object) -> Usage | None:
    """A stored ``Usage.to_dict()``; ``None`` for a result written before usage was stored."""
    if not isinstance(value, Mapping):
        return None
    counts = [value.get(key) for key in Usage.__dataclass_fields__]
    if not all(type(count) is int and count >= 0 for count in counts):
        return None
    return Usage(*counts)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class RunInfo:
    """A published run as listings show it. ``queue_position`` is 1-based while queued."""

    run_id: str
    agent: str
    agent_type: str
    parent_id: str | None
    depth: int
    status: str
    background: bool
    provider: str
    queue_position: int | None = None
    result: RunResult | None = None
    #: The run's open ``AskParent`` question, ``{"id", "text"}``, while it waits for the
    #: answer (``membrane.runtime.questions``).
    question: JSONObject | None = None

    def to_dict(self) -> JSONDict:
        data: JSONDict = {
            "run_id": self.run_id,
            "agent": self.agent,
            "parent_id": self.parent_id,
            "depth": self.depth,
            "status": self.status,
            "background": self.background,
        }
        if self.queue_position is not None:
            data["queue_position"] = self.queue_position
        if self.question is not None:
            data["question"] = dict(self.question)
        if self.result is not None:
            data["result"] = self.result.to_dict()
        return data

    def to_stored(self) -> JSONDict:
        """What a spawn receipt keeps to replay this run: every field but the queue place and
        the result (a replay reads the result from the session header, which stays current)."""
        return {
            "run_id": self.run_id,
            "agent": self.agent,
            "agent_type": self.agent_type,
            "parent_id": self.parent_id,
            "depth": self.depth,
            "status": self.status,
            "background": self.background,
            "provider": self.provider,
        }

    @classmethod
    def from_header(cls, header: SessionHeader) -> RunInfo:
        """The run a stored session header describes (a run no longer held in memory)."""
        meta, stored = header.meta, header.result
        result = None
        if stored is not None and header.status in END_STATES:
            result = RunResult.from_dict(stored)
        agent_type = meta.get("agent_type")
        question = meta.get(QUESTION_KEY)
        return cls(
            run_id=header.session_id,
            agent=header.agent,
            agent_type=agent_type if isinstance(agent_type, str) else header.agent,
            parent_id=header.parent_id,
            depth=header.delegation_depth,
            status=header.status,
            background=meta.get("background") is True,
            provider=header.provider,
            result=result,
            question=_open_question(question) if result is None else None,
        )

    @classmethod
    def from_stored(
        cls, data: JSONObject, *, status: str | None = None, result: RunResult | None = None
    ) -> RunInfo:
        """The run ``to_stored()`` kept, with its current ``status`` and ``result`` when known."""
        parent_id, depth = data.get("parent_id"), data.get("depth")
        return cls(
            run_id=str(data.get("run_id", "")),
            agent=str(data.get("agent", "")),
            agent_type=str(data.get("agent_type", data.get("agent", ""))),
            parent_id=parent_id if isinstance(parent_id, str) else None,
            depth=depth if type(depth) is int else 0,
            status=status if status is not None else str(data.get("status", "")),
            background=data.get("background") is True,
            provider=str(data.get("provider", "")),
            result=result,
        )
