"""The runtime's record of each published child, and the snapshots it hands out.

``RunInfo`` is what listings show; ``RunResult`` is how a run ended. Both are immutable
snapshots with ``to_dict()`` for tool results, JSON output and the store.

Statuses of a run: ``queued`` (published, waiting for a background slot), ``running``, then one
of the loop's end states: ``completed``, ``steered``, ``stopped``, ``aborted``, ``error``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import anyio

from membrane.json_types import JSONDict, JSONObject, JSONValue
from membrane.loop.outcome import ChildOutcome
from membrane.models.base import Usage
from membrane.runtime.provider import ProviderChild
from membrane.runtime.worktree import Worktree
from membrane.vocabulary import END_STATES, EndStatus

__all__ = ["RunInfo", "RunRecord", "RunResult", "event_kind"]


def event_kind(status: str) -> str:
    """The lifecycle event that reports an end status."""
    if status in ("completed", "steered"):
        return "completed"
    if status == "error":
        return "error"
    return "stopped"


@dataclass(frozen=True, slots=True)
class RunResult:
    """How one run ended: the child's ``outcome`` as its provider returned it, unchanged, with
    the run's id and agent. ``worktree`` is ``{branch, commit, has_changes}`` for an isolated
    child; ``error`` is ``{"code", "message", "data"}`` when ``status`` is ``error``."""

    run_id: str
    agent: str
    outcome: ChildOutcome
    worktree: JSONObject | None = None

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
        )
        return cls(
            run_id=str(data.get("run_id", "")),
            agent=str(data.get("agent", "")),
            outcome=outcome,
            worktree=dict(worktree) if isinstance(worktree, Mapping) else None,
        )


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
    worktree: Worktree | None = None
    #: The child's ``# Skills`` catalog (what an inheriting grandchild receives), or ``None``.
    skills: Mapping[str, str] | None = None
    status: str = "queued"
    stop_requested: bool = False
    has_edge: bool = False
    #: How many transcript messages the store holds, as far as this process wrote them.
    stored_messages: int = 0
    #: Waits of the parent on this run now in progress (``TaskWait``, a foreground ``Task``).
    parent_waits: int = 0
    #: The outbox item of this run's completion notice, until delivered or settled by a wait.
    outbox_item: int | None = None
    children: list[str] = field(default_factory=list)
    result: RunResult | None = None
    done: anyio.Event = field(default_factory=anyio.Event)

    @property
    def finished(self) -> bool:
        return self.result is not None

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
        )

    def result_of(self, outcome: ChildOutcome, *, worktree: Mapping[str, Any] | None) -> RunResult:
        return RunResult(run_id=self.run_id, agent=self.agent, outcome=outcome, worktree=worktree)
