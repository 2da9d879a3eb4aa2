"""``tools: inherit`` through the runtime (seed 000): a child gets its parent's live catalog,
deferred MCP tools included, minus the deny list; a tool the parent gains later reaches the
child at its next turn."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import anyio
import pytest

from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.testing import FunctionModel
from membrane.tools.spec import ToolContext

from .conftest import Project, echo_tool

pytestmark = pytest.mark.anyio


async def test_an_inheriting_child_sees_the_parents_live_catalog_minus_the_deny_list(
    project: Project,
) -> None:
    project.agent("lead", tools="inherit", allowed_subagents="[porter]")
    project.agent("porter", tools="inherit")
    project.registry.register(replace(echo_tool("mcp__gh__search"), origin="mcp:gh", deferred=True))
    for denied in ("ToolSearch", "EnterPlanMode", "asktool"):
        project.registry.register(replace(echo_tool(denied), origin="host"))

    async def gain(arguments: Mapping[str, Any], context: ToolContext) -> str:
        # The parent's deployment gains a tool while the child runs.
        project.registry.register(replace(echo_tool("mcp__gh__late"), origin="mcp:gh"))
        return "gained"

    project.registry.register(replace(echo_tool("Glob"), handler=gain), replace=True)
    offered: dict[str, list[set[str]]] = {}

    async def answer(request: ModelRequest) -> ModelResponse:
        names = {tool["name"] for tool in request.tools}
        offered.setdefault(request.agent, []).append(names)
        turn = len(offered[request.agent])
        if request.agent == "lead" and turn == 1:
            call = ToolCall("t1", "Task", {"agent": "porter", "task": "look around"})
            return ModelResponse(tool_calls=(call,))
        if request.agent == "porter" and turn == 1:
            return ModelResponse(tool_calls=(ToolCall("g", "Glob", {}),))
        return ModelResponse(text=f"{request.agent} done")

    async with project.runtime(FunctionModel(answer)) as runtime:
        with anyio.fail_after(20):
            result = await runtime.run(SubagentStartRequest("lead", "go"))
    assert result.status == "completed"
    lead_first = offered["lead"][0]
    porter_first, porter_second = offered["porter"]
    assert {"mcp__gh__search", "Read", "Write", "Task"} <= lead_first
    assert "mcp__gh__search" in porter_first  # deferred MCP tools are inherited
    assert "Write" in porter_first  # inherit of mutation is inheriting mutation (seed 000)
    deny = {"Task", "TaskWait", "TaskList", "TaskStop", "ToolSearch", "EnterPlanMode", "asktool"}
    assert not deny & porter_first
    assert "mcp__gh__late" not in porter_first
    assert "mcp__gh__late" in porter_second  # the parent's catalog is live
