"""The real ``mcp-server-time`` from PyPI, mounted through settings and the real runtime.

One run: ``lead`` (``tools: Read, mcp__time__*``) sees and calls the server's tools, then
delegates to an inheriting child (gets them), a child that selects one other tool of the
server (cannot call this one: vetoed, nothing leaked), an isolated one (gets none), and two
with no MCP selector at all (``tools: Read``, and no tools line): none either.
"""

from __future__ import annotations

import json

import anyio
import pytest

from membrane.errors import SetupFailed
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest

from .conftest import TIME_SERVER, McpProject, error_of, last_tool_result

pytestmark = pytest.mark.anyio

NOW = "mcp__time__get_current_time"
CONVERT = "mcp__time__convert_time"


async def test_a_mounted_time_server_reaches_exactly_the_children_that_may_have_it(
    mcp_project: McpProject,
) -> None:
    mcp_project.server("time", TIME_SERVER)
    mcp_project.agent(
        "lead",
        tools="Read, mcp__time__*",
        allowed_subagents="[heir, narrow, loner, plain, bare]",
    )
    mcp_project.agent("plain", tools="Read")  # tools written, no MCP selector
    mcp_project.agent("bare")  # no tools field: the read-only default, nothing else
    mcp_project.agent("heir", tools="inherit")
    mcp_project.agent("narrow", tools="Read, ext:time/convert_time")
    mcp_project.agent("loner", tools="Read, mcp__time__*", isolated=True)
    offered: dict[str, list[set[str]]] = {}
    seen: dict[str, list[ModelRequest]] = {}

    async def answer(request: ModelRequest) -> ModelResponse:
        names = {tool["name"] for tool in request.tools}
        offered.setdefault(request.agent, []).append(names)
        seen.setdefault(request.agent, []).append(request)
        turn = len(offered[request.agent])
        if request.agent == "lead":
            plan = [
                ToolCall("t1", NOW, {"timezone": "UTC"}),
                ToolCall("t2", "Task", {"agent": "heir", "task": "what time is it"}),
                ToolCall("t3", "Task", {"agent": "narrow", "task": "what time is it"}),
                ToolCall("t4", "Task", {"agent": "loner", "task": "what time is it"}),
                ToolCall("t5", "Task", {"agent": "plain", "task": "what time is it"}),
                ToolCall("t6", "Task", {"agent": "bare", "task": "what time is it"}),
            ]
            if turn <= len(plan):
                return ModelResponse(tool_calls=(plan[turn - 1],))
        elif turn == 1:
            return ModelResponse(tool_calls=(ToolCall("c1", NOW, {"timezone": "UTC"}),))
        return ModelResponse(text=f"{request.agent} done")

    async with mcp_project.runtime(answer) as (runtime, servers):
        with anyio.fail_after(60):
            result = await runtime.run(SubagentStartRequest("lead", "go", request_id="r1"))
        assert servers.get("time") is not None
        assert servers.get("time").starts == 1  # type: ignore[union-attr]  # one process, shared

    assert result.status == "completed", result
    assert {NOW, CONVERT, "Read"} <= offered["lead"][0]
    answer_to_lead = last_tool_result(seen["lead"][1])
    assert not answer_to_lead.is_error
    assert json.loads(answer_to_lead.content)["timezone"] == "UTC"

    # tools: inherit: the parent holds the server's tools, so the child gets them and calls one.
    assert {NOW, CONVERT} <= offered["heir"][0]
    assert json.loads(last_tool_result(seen["heir"][1]).content)["timezone"] == "UTC"

    # Selecting another tool of the server does not make this one callable.
    assert CONVERT in offered["narrow"][0]
    assert NOW not in offered["narrow"][0]
    error = error_of(last_tool_result(seen["narrow"][1]))
    assert error["code"] == "tool-not-visible"
    assert CONVERT not in str(error["message"])  # the refusal names only the requested tool

    # isolated: true loads no MCP servers, whatever the tools line selects.
    assert not {n for n in offered["loner"][0] if n.startswith("mcp__")}
    assert error_of(last_tool_result(seen["loner"][1]))["code"] == "tool-not-visible"

    # Without a selector for it (DESIGN rule 2), a running server's tools reach neither a
    # child whose tools line names none nor one that leaves tools out.
    for name in ("plain", "bare"):
        assert not {n for n in offered[name][0] if n.startswith("mcp__")}
        refused = error_of(last_tool_result(seen[name][1]))
        assert refused["code"] == "tool-not-visible"
        assert CONVERT not in str(refused["message"])


async def test_a_role_may_name_tools_of_a_server_that_has_not_started(
    mcp_project: McpProject,
) -> None:
    mcp_project.server("time", TIME_SERVER)
    config = mcp_project.root / ".membrane" / "config.toml"
    roles = f'[roles.clock]\nallow = ["Read", "{NOW}"]\n[roles.typo]\nallow = ["Raed"]\n'
    config.write_text(config.read_text(encoding="utf-8") + roles, encoding="utf-8")
    mcp_project.agent("reader", tools="Read, mcp__time__*")
    offered: list[set[str]] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        offered.append({tool["name"] for tool in request.tools})
        return ModelResponse(text="done")

    async with mcp_project.runtime(answer) as (runtime, servers):
        with anyio.fail_after(60):
            # Nothing listed the server's tools yet: the role's name for one is not a typo.
            assert servers.servers["time"].tool_names() == frozenset()
            ok = await runtime.run(SubagentStartRequest("reader", "go", role="clock"))
            with pytest.raises(SetupFailed) as typo:
                await runtime.start(SubagentStartRequest("reader", "go", role="typo"))
    assert ok.status == "completed", ok
    assert offered[0] == {"Read", NOW}  # the role narrows the server's tools to the one named
    assert typo.value.code == "setup-failed"
