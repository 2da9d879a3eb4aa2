"""Delegation over ``membrane mcp serve``: the ``Task`` tools of a served view.

A served view that may delegate (its role admits ``Task``, or its agent's effective authority
holds the delegation tools) offers ``Task``, ``TaskWait``, ``TaskList``, ``TaskStop`` and
``TaskMessage``, the same tools a child gets, on a runtime the server holds open. Each run a
client starts is a top-level run of the project (its state in the project's store) with the
server's trusted role installed on its scope, so a child can never hold a tool the role does
not allow; with ``--agent`` only that agent's ``allowed_subagents`` may be started, each held to
the ceiling that agent passes down (DESIGN rule 13: its permission mode, denials, rules and
network, as for a child it started itself). The other tools reach only the runs this server
started: another run's id is ``unknown-run``.

Starts are deduplicated like a child's ``Task``: an identical call replays the run the first
one started (across restarts of the server, since receipts are durable).
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Collection, Sequence

from membrane.durable.messages import Delivery
from membrane.errors import UnknownRun
from membrane.resolve.ceiling import Ceiling
from membrane.runtime import RunInfo, RunResult, SubagentRuntime, SubagentStartRequest
from membrane.runtime.delegation import delegation_tools
from membrane.tools.restriction import ToolPredicate
from membrane.tools.scope import Scope
from membrane.vocabulary import DELEGATION_TOOLS

__all__ = ["ServedRuns", "add_delegation"]


class ServedRuns:
    """The runs one served view started, as the ``DelegationHost`` its ``Task`` tools use.
    ``ceiling``: the one the served agent passes down, which every run started here is held
    to (``None``: a role's view, held to the deployment's alone)."""

    def __init__(self, runtime: SubagentRuntime, *, ceiling: Ceiling | None = None) -> None:
        self.runtime = runtime
        self.ceiling = ceiling
        self._ids: dict[str, None] = {}

    def _mine(self, run_id: str) -> str:
        if run_id not in self._ids:
            raise UnknownRun(f"no run {run_id!r} was started here", run_id=run_id)
        return run_id

    async def start(
        self, request: SubagentStartRequest, *, allowed_agents: Collection[str] | None = None
    ) -> RunInfo:
        top_level = dataclasses.replace(request, parent_id=None)
        info = await self.runtime.start(
            top_level, allowed_agents=allowed_agents, ceiling=self.ceiling
        )
        self._ids[info.run_id] = None
        return info

    async def wait(self, run_id: str, *, caller: str | None = None) -> RunResult:
        return await self.runtime.wait(self._mine(run_id))

    async def wait_all(
        self, run_ids: Sequence[str], *, timeout: float | None = None, caller: str | None = None
    ) -> builtins.list[RunInfo]:
        return await self.runtime.wait_all(
            [self._mine(run_id) for run_id in run_ids], timeout=timeout
        )

    def startable(self, allowed: Collection[str]) -> tuple[str, ...]:
        return self.runtime.startable(allowed)

    def runs(self, *, parent_id: str | None = None) -> builtins.list[RunInfo]:
        return [self.runtime.get(run_id) for run_id in self._ids]

    async def stop(self, run_id: str, *, caller: str | None = None) -> RunInfo:
        return await self.runtime.stop(self._mine(run_id))

    def message(
        self,
        run_id: str,
        text: str,
        *,
        request_id: str | None = None,
        caller: str | None = None,
        kind: str | None = None,
    ) -> Delivery:
        return self.runtime.message(self._mine(run_id), text, request_id=request_id, kind=kind)


def add_delegation(
    scope: Scope,
    runs: ServedRuns,
    *,
    names: Sequence[str] = DELEGATION_TOOLS,
    allowed: Sequence[str] = ("*",),
    role: str | None = None,
    role_restriction: ToolPredicate | None = None,
    session: str = "mcp-serve",
) -> tuple[str, ...]:
    """Add to ``scope`` those of the delegation tools ``names`` that ``role_restriction``
    admits (scope-local tools pass no filter, so the role is applied here); returns the names
    added. ``session`` keys the derived request ids of the starts."""
    tools = delegation_tools(
        runs,
        parent_id=session,
        allowed=allowed,
        config=runs.runtime.delegation,
        role=role,
        names=names,
    )
    added: list[str] = []
    for tool in tools:
        if role_restriction is None or role_restriction.admits(tool):
            scope.add_local(tool, replace=True)
            added.append(tool.name)
    return tuple(added)
