"""What a delegating parent may start, and what its errors may tell the model."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from membrane.errors import ModelError, UnknownToolInFilter
from membrane.models.base import Message, ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.runtime.delegation import DelegationConfig
from membrane.testing import FunctionModel, ScriptedModel
from membrane.tools.restriction import Restriction

from .conftest import Project, call_turn, echo_tool, tool_results


def _error(message: Message) -> dict[str, Any]:
    assert message.is_error, message.content
    error: dict[str, Any] = json.loads(message.content)["error"]
    return error


@pytest.mark.anyio
async def test_a_task_that_would_fall_back_to_an_agent_not_allowed_is_refused(
    project: Project,
) -> None:
    # `reviewer` is allowed but does not exist: the catalog would run general-purpose instead.
    project.agent("lead", tools="Read", allowed_subagents="[reviewer]")
    model = ScriptedModel(
        {
            "agents": {
                "lead": [call_turn("Task", agent="reviewer", task="x"), {"text": "done"}],
                "general-purpose": [{"text": "I should never run"}],
            }
        }
    )
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "go"))
        agents = [info.agent for info in runtime.runs()]
    assert agents == ["lead"]
    error = _error(tool_results(model, "lead")[0])
    assert error["code"] == "unknown-subagent"
    assert "reviewer" in error["message"]
    assert "general-purpose" not in error["message"]


@pytest.mark.anyio
async def test_a_fallback_to_an_allowed_agent_still_starts(project: Project) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[reviewer, general-purpose]")
    model = ScriptedModel(
        {
            "agents": {
                "lead": [call_turn("Task", agent="reviewer", task="x"), {"text": "done"}],
                "general-purpose": [{"text": "general answer"}],
            }
        }
    )
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "go"))
    result = json.loads(tool_results(model, "lead")[0].content)
    assert (result["agent"], result["text"]) == ("general-purpose", "general answer")


@pytest.mark.anyio
async def test_an_unknown_subagent_error_names_only_the_agents_the_parent_may_start(
    project: Project,
) -> None:
    project.settings = dataclasses.replace(project.settings, fallback_subagent="none")
    project.agent("lead", tools="Read", allowed_subagents="[zzqx]")
    project.agent("topsecret-exfil")
    model = ScriptedModel(
        {"agents": {"lead": [call_turn("Task", agent="zzqx", task="x"), {"text": "done"}]}}
    )
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "go"))
    error = _error(tool_results(model, "lead")[0])
    assert error["code"] == "unknown-subagent"
    assert "zzqx" in error["message"]
    for hidden in ("topsecret", "general-purpose", "explorer", "known"):
        assert hidden not in error["message"]


def test_a_misspelt_delegation_tool_filter_fails_when_the_runtime_is_built(
    project: Project,
) -> None:
    delegation = DelegationConfig(tool_filter=Restriction(deny=["Writ"]))
    with pytest.raises(UnknownToolInFilter):
        project.runtime(ScriptedModel({"default": [{"text": "ok"}]}), delegation=delegation)


@pytest.mark.anyio
async def test_a_filter_error_shown_to_the_model_suggests_no_hidden_tool(
    project: Project,
) -> None:
    project.registry.register(echo_tool("AdminSecret1"))
    project.registry.register(echo_tool("AdminSecret2"))
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker")
    delegation = DelegationConfig(tool_filter=Restriction(deny=["AdminSecret1"]))
    model = ScriptedModel(
        {"agents": {"lead": [call_turn("Task", agent="worker", task="x"), {"text": "done"}]}}
    )
    async with project.runtime(model, delegation=delegation) as runtime:
        # Valid at mount; the registry changes before the model's call.
        project.registry.remove("AdminSecret1")
        await runtime.run(SubagentStartRequest("lead", "go"))
        agents = [info.agent for info in runtime.runs()]
    assert agents == ["lead"]
    error = _error(tool_results(model, "lead")[0])
    assert error["code"] == "unknown-tool-in-filter"
    assert "AdminSecret" not in error["message"]


@pytest.mark.anyio
async def test_a_foreground_child_that_fails_is_an_error_result_with_its_error(
    project: Project,
) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker")

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "worker":
            raise ModelError("the provider is down", model="test")
        if not any(m.role == "tool" for m in request.messages):
            call = ToolCall("t1", "Task", {"agent": "worker", "task": "x"})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        return ModelResponse(text="lead done")

    model = FunctionModel(answer)
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "go"))
    error = _error(tool_results(model, "lead")[0])
    assert error["code"] == "child-failed"
    assert "model-error" in error["message"] and "the provider is down" in error["message"]


@pytest.mark.anyio
async def test_a_foreground_child_cut_off_by_its_turn_limit_is_an_error_result_with_its_text(
    project: Project,
) -> None:
    project.settings = dataclasses.replace(project.settings, grace_turns=0)
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker", tools="Grep")

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "worker":
            call = ToolCall("w1", "Grep", {"pattern": "x"})
            return ModelResponse(text="partial findings", tool_calls=(call,))
        if not any(m.role == "tool" for m in request.messages):
            call = ToolCall("t1", "Task", {"agent": "worker", "task": "x", "max_turns": 1})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        return ModelResponse(text="lead done")

    model = FunctionModel(answer)
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "go"))
    error = _error(tool_results(model, "lead")[0])
    assert error["code"] == "child-failed"
    assert "aborted" in error["message"] and "partial findings" in error["message"]
