"""Mentions through the runtime: ``@NAME rest`` to an agent that may delegate runs the mention
clone first (seed 003 section 3); the clone can start only ``NAME``, and its outcome joins the
parent's conversation before the parent's own turn."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import InProcessProvider, SubagentStartRequest
from membrane.testing import FunctionModel, ScriptedModel

from .conftest import Project

pytestmark = pytest.mark.anyio


def task_call(agent: str, task: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "Task", "arguments": {"agent": agent, "task": task}}]}


def team(project: Project) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[reviewer, helper]")
    project.agent("reviewer", tools="Read")
    project.agent("helper", tools="Read")


async def test_a_mention_task_delegates_through_the_clone_before_the_parent_answers(
    project: Project,
) -> None:
    team(project)
    model = ScriptedModel(
        {
            "agents": {
                "mention": [task_call("reviewer", "Review src/auth.py login()")],
                "reviewer": [{"text": "reviewer: login() looks fine"}],
                "lead": [{"text": "the reviewer approved it"}],
            }
        }
    )
    async with project.runtime(InProcessProvider(model)) as runtime:
        result = await runtime.run(SubagentStartRequest("lead", "@reviewer check the auth change"))
        runs = runtime.runs()
    assert (result.status, result.text) == ("completed", "the reviewer approved it")
    clone, child, lead = model.requests
    assert clone.agent == "mention" and [t["name"] for t in clone.tools] == ["Task"]
    assert clone.system == lead.system
    assert child.agent == "reviewer"
    assert child.messages[-1].content.endswith("Review src/auth.py login()")
    reviewer = [run for run in runs if run.agent == "reviewer"]
    assert len(reviewer) == 1 and reviewer[0].parent_id == result.run_id
    user, reply, answer = lead.messages
    assert (user.role, user.content) == ("user", "@reviewer check the auth change")
    assert reply.role == "assistant"
    assert [(c.name, c.arguments["agent"]) for c in reply.tool_calls] == [("Task", "reviewer")]
    assert answer.role == "tool" and answer.tool_call_id == reply.tool_calls[0].id
    assert not answer.is_error
    assert json.loads(answer.content)["text"] == "reviewer: login() looks fine"


async def test_the_clone_cannot_start_an_agent_other_than_the_mentioned_one(
    project: Project,
) -> None:
    team(project)
    model = ScriptedModel(
        {
            "agents": {
                "mention": [task_call("helper", "do it instead")],
                "lead": [{"text": "handled it myself"}],
            }
        }
    )
    async with project.runtime(InProcessProvider(model)) as runtime:
        result = await runtime.run(SubagentStartRequest("lead", "@reviewer check it"))
        runs = runtime.runs()
    assert [run.agent for run in runs] == ["lead"], "no child was started"
    assert result.status == "completed"
    lead = model.requests[-1]
    assert [(m.role, m.content) for m in lead.messages] == [("user", "@reviewer check it")]


async def test_a_mention_of_an_agent_the_parent_may_not_start_is_ordinary_text(
    project: Project,
) -> None:
    team(project)
    project.agent("stranger")
    model = ScriptedModel(
        {
            "agents": {
                "mention": [task_call("stranger", "hi")],
                "lead": [{"text": "hello"}],
            }
        }
    )
    async with project.runtime(InProcessProvider(model)) as runtime:
        result = await runtime.run(SubagentStartRequest("lead", "@stranger said hi"))
        runs = runtime.runs()
    assert [run.agent for run in runs] == ["lead"]
    assert result.text == "hello"
    assert [(m.role, m.content) for m in model.requests[-1].messages] == [
        ("user", "@stranger said hi")
    ]


async def test_an_agent_without_the_delegation_tool_reads_a_mention_as_text(
    project: Project,
) -> None:
    project.agent("solo", tools="Read")
    model = ScriptedModel({"agents": {"solo": [{"text": "ok"}]}})
    async with project.runtime(InProcessProvider(model)) as runtime:
        result = await runtime.run(SubagentStartRequest("solo", "@reviewer look"))
    assert result.status == "completed"
    assert [r.agent for r in model.requests] == ["solo"]


async def test_a_mention_in_a_steer_runs_the_clone_at_the_next_turn(project: Project) -> None:
    team(project)

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "mention":
            call = ToolCall("m1", "Task", {"agent": "reviewer", "task": "second look"})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        if request.agent == "reviewer":
            return ModelResponse(text="reviewer: still fine")
        if len([r for r in model.requests if r.agent == "lead"]) == 1:
            runtime.steer(request.run_id, "@reviewer look again")
            return ModelResponse(text="first answer")
        return ModelResponse(text="second answer")

    model = FunctionModel(answer)
    async with project.runtime(InProcessProvider(model)) as runtime:
        with anyio.fail_after(20):
            result = await runtime.run(SubagentStartRequest("lead", "start"))
    assert (result.status, result.text) == ("completed", "second answer")
    assert [r.agent for r in model.requests] == ["lead", "mention", "reviewer", "lead"]
    last = model.requests[-1].messages
    assert [m.role for m in last[-3:]] == ["user", "assistant", "tool"]
    assert last[-3].content == "@reviewer look again"
    assert json.loads(last[-1].content)["text"] == "reviewer: still fine"
