"""A server of our own (``dynamic_server.py``, on the SDK's server API) as a real subprocess:
tools added and removed while a child runs, faithful results, a server killed mid-call."""

from __future__ import annotations

import anyio
import pytest

from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest

from .conftest import DYNAMIC, McpProject, error_of, last_tool_result
from .dynamic_server import PICTURE

pytestmark = pytest.mark.anyio


async def test_a_child_sees_tools_the_server_adds_and_removes_at_its_next_turn(
    mcp_project: McpProject,
) -> None:
    mcp_project.server("dyn", DYNAMIC)
    mcp_project.agent("worker", tools="mcp__dyn__*")
    plan = [
        ToolCall("c1", "mcp__dyn__add", {"name": "late"}),
        ToolCall("c2", "mcp__dyn__late", {"text": "hi"}),
        ToolCall("c3", "mcp__dyn__remove", {"name": "late"}),
        ToolCall("c4", "mcp__dyn__late", {"text": "again"}),
        ToolCall("c5", "mcp__dyn__picture", {}),
        ToolCall("c6", "mcp__dyn__fail", {"why": "it must"}),
        ToolCall("c7", "mcp__dyn__crash", {}),
        ToolCall("c8", "mcp__dyn__add", {"name": "after"}),
    ]
    offered: list[set[str]] = []
    requests: list[ModelRequest] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        offered.append({tool["name"] for tool in request.tools})
        requests.append(request)
        turn = len(offered)
        if turn <= len(plan):
            return ModelResponse(tool_calls=(plan[turn - 1],))
        return ModelResponse(text="worker done")

    async with mcp_project.runtime(answer) as (runtime, servers):
        with anyio.fail_after(60):
            result = await runtime.run(SubagentStartRequest("worker", "go", request_id="r1"))
        assert servers.get("dyn") is not None

    # The server's stderr went to its log (and a line for the loss), never into a prompt.
    log = (mcp_project.home / "logs" / "mcp" / "dyn.log").read_text(encoding="utf-8")
    assert "dynamic server" in log
    assert "lost" in log
    assert not any("dynamic server" in m.content for r in requests for m in r.messages)

    assert result.status == "completed", result
    assert "mcp__dyn__late" not in offered[0]
    # Turn 2 follows the call that added the tool: the child is offered it and can call it.
    assert "mcp__dyn__late" in offered[1]
    assert last_tool_result(requests[2]).content == "late:hi"
    # Removed: gone from the next view, and a call to it is vetoed without naming anything else.
    assert "mcp__dyn__late" not in offered[3]
    vetoed = error_of(last_tool_result(requests[4]))
    assert vetoed["code"] == "tool-not-visible"
    assert "mcp__dyn__add" not in str(vetoed["message"])
    # An image arrives as an attachment, byte for byte, not pasted into the text.
    picture = last_tool_result(requests[5])
    assert not picture.is_error
    assert [(a.mime_type, a.data) for a in picture.attachments] == [("image/png", PICTURE)]
    assert "iVBOR" not in picture.content
    # isError is an error tool result carrying the server's text.
    failed = error_of(last_tool_result(requests[6]))
    assert failed["code"] == "mcp-tool-error"
    assert "failed because it must" in str(failed["message"])
    # Killed mid-call: the call fails as unavailable, the child and the runtime carry on.
    crashed = error_of(last_tool_result(requests[7]))
    assert crashed["code"] == "mcp-server-unavailable"
    assert "mcp__dyn__crash" not in offered[7]


async def test_a_server_that_cannot_start_leaves_its_tools_out_and_the_child_runs_on(
    mcp_project: McpProject,
) -> None:
    mcp_project.server("broken", {"command": "/nonexistent/mcp-server", "startup_timeout": 5})
    mcp_project.agent("worker", tools="Read, mcp__broken__*")
    offered: list[set[str]] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        offered.append({tool["name"] for tool in request.tools})
        if len(offered) == 1:
            return ModelResponse(tool_calls=(ToolCall("c1", "mcp__broken__x", {}),))
        return ModelResponse(text="done without it")

    async with mcp_project.runtime(answer) as (runtime, servers):
        with anyio.fail_after(30):
            result = await runtime.run(SubagentStartRequest("worker", "go", request_id="r1"))
        server = servers.get("broken")
        assert server is not None
        assert server.state in ("backoff", "failed")
        assert server.reason

    assert result.status == "completed"
    assert not {n for n in offered[0] if n.startswith("mcp__")}
    log = mcp_project.home / "logs" / "mcp" / "broken.log"
    assert "lost" in log.read_text(encoding="utf-8")


async def test_a_call_the_server_never_answers_fails_as_unavailable_within_its_timeout(
    mcp_project: McpProject,
) -> None:
    mcp_project.server("dyn", {**DYNAMIC, "timeout": 1})
    mcp_project.agent("worker", tools="mcp__dyn__*")
    requests: list[ModelRequest] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        requests.append(request)
        if len(requests) == 1:
            return ModelResponse(tool_calls=(ToolCall("c1", "mcp__dyn__hang", {}),))
        if len(requests) == 2:
            return ModelResponse(tool_calls=(ToolCall("c2", "mcp__dyn__add", {"name": "z"}),))
        return ModelResponse(text="done")

    async with mcp_project.runtime(answer) as (runtime, _servers):
        with anyio.fail_after(60):
            result = await runtime.run(SubagentStartRequest("worker", "go", request_id="r1"))

    assert result.status == "completed"
    hung = error_of(last_tool_result(requests[1]))
    assert hung["code"] == "mcp-server-unavailable"
    assert "no answer within 1s" in str(hung["message"])
    # The server still answers pings, so it stays mounted and the next call works.
    assert last_tool_result(requests[2]).content == "added z"
