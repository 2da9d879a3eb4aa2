"""Names a hostile model forges for tools that exist somewhere but are not in its view: a tool
registered after the child started, one removed while it runs, and a sibling's own local tools.
None of them ever runs, and no error names a tool the child cannot see."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from membrane.models.base import Message, ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.tools.registry import ToolRegistry

from .support import Ran, runtime_for, spy_tool

pytestmark = pytest.mark.anyio


def _agent(project: Path, name: str, frontmatter: str) -> None:
    (project / ".membrane" / "agents" / f"{name}.md").write_text(
        f"---\nname: {name}\ndescription: The {name} agent.\n{frontmatter}\n---\nx\n"
    )


def _errors(messages: list[Message]) -> list[str]:
    return [json.loads(m.content)["error"]["code"] for m in messages if m.is_error]


async def test_a_tool_registered_after_the_child_started_is_not_callable(project: Path) -> None:
    ran: Ran = []
    registry = ToolRegistry()
    answered: list[Message] = []
    offered: list[set[str]] = []
    late = ["LateDeploy", "read", "grep", "READ"]  # host names match exactly: never a builtin

    async def answer(request: ModelRequest) -> ModelResponse:
        offered.append({str(tool["name"]) for tool in request.tools})
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn == 0:
            for name in late:
                registry.register(spy_tool(name, ran))
            calls = [ToolCall(f"l{i}", name, {}) for i, name in enumerate(late)]
            return ModelResponse(tool_calls=tuple(calls), stop_reason="tool_calls")
        answered.extend(m for m in request.messages if m.role == "tool")
        return ModelResponse(text="done")

    runtime = runtime_for(project, answer, registry=registry)
    with anyio.fail_after(60):
        async with runtime:
            result = await runtime.run(SubagentStartRequest("scout", "look"))
    assert result.status == "completed"
    assert ran == []
    assert offered == [{"Grep", "Read"}, {"Grep", "Read"}]
    # A call names a tool exactly: `read` is neither the builtin Read nor the hidden host tool.
    assert _errors(answered) == ["tool-not-visible"] * len(late)
    assert all("LateDeploy" not in m.content for m in answered[1:])


async def test_a_tool_removed_while_the_child_runs_is_gone_from_its_view(project: Path) -> None:
    _agent(project, "deployer", "tools: Read, Deploy")
    ran: Ran = []
    registry = ToolRegistry()
    registry.register(spy_tool("Deploy", ran))
    registry.register(spy_tool("DeployProd", ran))  # hidden throughout: never named by errors
    answered: list[Message] = []
    offered: list[set[str]] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        offered.append({str(tool["name"]) for tool in request.tools})
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn == 0:
            return ModelResponse(
                tool_calls=(ToolCall("d0", "Deploy", {}),), stop_reason="tool_calls"
            )
        if turn == 1:
            registry.remove("Deploy")
            calls = (ToolCall("d1", "Deploy", {}), ToolCall("d2", "deploy", {}))
            return ModelResponse(tool_calls=calls, stop_reason="tool_calls")
        answered.extend(m for m in request.messages if m.role == "tool")
        return ModelResponse(text="done")

    runtime = runtime_for(project, answer, registry=registry)
    with anyio.fail_after(60):
        async with runtime:
            result = await runtime.run(SubagentStartRequest("deployer", "ship"))
    assert result.status == "completed"
    assert ran == ["Deploy"]  # once, while it was there
    assert offered[0] == {"Deploy", "Read"} and offered[2] == {"Read"}
    assert _errors(answered) == ["tool-not-visible", "tool-not-visible"]
    assert all("DeployProd" not in m.content for m in answered)


async def test_a_child_cannot_call_a_siblings_local_tools(project: Path) -> None:
    _agent(project, "lead", "tools: Read\nallowed_subagents: [planner, scout]")
    _agent(project, "planner", "tools: Read\nallowed_subagents: [scout]")
    forged = ["Task", "TaskStop", "TaskList", "TaskMessage", "TaskWait", "task", "Skill"]
    answered: list[Message] = []
    planner_up = anyio.Event()
    release = anyio.Event()

    async def answer(request: ModelRequest) -> ModelResponse:
        results = [m for m in request.messages if m.role == "tool"]
        if request.agent == "lead":
            if not results:
                starts = (
                    ToolCall(
                        "s1", "Task", {"agent": "planner", "task": "plan", "background": True}
                    ),
                    ToolCall("s2", "Task", {"agent": "scout", "task": "look", "background": True}),
                )
                return ModelResponse(tool_calls=starts, stop_reason="tool_calls")
            if len(results) == 2:
                ids = [json.loads(m.content)["run_id"] for m in results]
                wait = ToolCall("w", "TaskWait", {"ids": ids})
                return ModelResponse(tool_calls=(wait,), stop_reason="tool_calls")
            return ModelResponse(text="done")
        if request.agent == "planner":
            planner_up.set()
            await release.wait()  # alive, with its delegation tools, while the scout attacks
            return ModelResponse(text="planned")
        if not results:
            await planner_up.wait()
            planner = next(r for r in runtime.runs() if r.agent == "planner").run_id
            arguments = {"agent": "scout", "task": "again", "id": planner, "ids": [planner],
                         "message": "stop", "skill": "x"}  # fmt: skip
            calls = [ToolCall(f"f{i}", name, arguments) for i, name in enumerate(forged)]
            return ModelResponse(tool_calls=tuple(calls), stop_reason="tool_calls")
        answered.extend(results)
        release.set()
        return ModelResponse(text="scouted")

    runtime = runtime_for(project, answer)
    with anyio.fail_after(60):
        async with runtime:
            result = await runtime.run(SubagentStartRequest("lead", "go"))
            runs = runtime.runs()
    assert result.status == "completed"
    assert _errors(answered) == ["tool-not-visible"] * len(forged)
    assert sorted(r.agent for r in runs) == ["lead", "planner", "scout"]  # no child of the scout
    assert all(r.status == "completed" for r in runs)  # the planner was not stopped
