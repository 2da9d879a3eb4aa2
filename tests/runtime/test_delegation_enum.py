"""``Task``'s ``agent`` is an enum of exactly the agents the parent may start, as the catalog
stands at each turn: what constrained decoding on a local server needs to write a real name."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.testing import FunctionModel

from .conftest import Project

pytestmark = pytest.mark.anyio


def task_agent(request: ModelRequest) -> dict[str, Any]:
    """The ``agent`` property of the ``Task`` tool offered in ``request``."""
    [task] = [tool for tool in request.tools if tool["name"] == "Task"]
    agent: dict[str, Any] = task["input_schema"]["properties"]["agent"]
    return agent


def answering(text: str = "done") -> FunctionModel:
    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text=text)

    return FunctionModel(answer)


async def test_the_enum_lists_the_allowed_agents_the_catalog_can_start(project: Project) -> None:
    project.agent(
        "lead", tools="Read", allowed_subagents="[Reader, writer, ghost, off, boss, secret]"
    )
    project.agent("reader", tools="Read")
    project.agent("writer", tools="Read")
    project.agent("off", tools="Read", enabled="false")
    project.agent("boss", tools="Read", mode="primary")
    project.agent("secret", tools="Read", hidden="true")
    project.agent("stranger", tools="Read")
    project.settings = dataclasses.replace(project.settings, fallback_subagent="none")
    model = answering()
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "go"))
    agent = task_agent(model.requests[0])
    # Catalog spelling; unknown, disabled and primary names (which would not start) left out;
    # a hidden agent named in the list may be started, so it is there; `stranger` never is.
    assert agent["enum"] == ["reader", "writer", "secret"]
    assert agent["type"] == "string"
    [task] = [tool for tool in model.requests[0].tools if tool["name"] == "Task"]
    assert "reader, writer, secret" in task["description"]
    assert "stranger" not in str(task)


async def test_a_star_lists_every_startable_agent_but_the_hidden_ones(project: Project) -> None:
    project.agent("lead", tools="Read", allowed_subagents="['*']")
    project.agent("reader", tools="Read")
    project.agent("secret", tools="Read", hidden="true")
    project.agent("boss", tools="Read", mode="primary")
    model = answering()
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "go"))
    names = task_agent(model.requests[0])["enum"]
    assert "reader" in names and "lead" in names and "general-purpose" in names
    assert "secret" not in names and "boss" not in names
    assert names == sorted(names)


async def test_a_listed_name_that_falls_back_to_an_allowed_agent_stays_in_the_enum(
    project: Project,
) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[reviewer, general-purpose]")
    model = answering()
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "go"))
    assert task_agent(model.requests[0])["enum"] == ["reviewer", "general-purpose"]


async def test_with_nothing_to_start_agent_is_a_plain_string(project: Project) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[nobody]")
    project.settings = dataclasses.replace(project.settings, fallback_subagent="none")
    model = answering()
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "go"))
    agent = task_agent(model.requests[0])
    assert "enum" not in agent and agent["type"] == "string"


async def test_a_catalog_change_reaches_the_enum_at_the_next_turn(project: Project) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[reader, writer]")
    project.agent("reader", tools="Read")

    async def lead(request: ModelRequest) -> ModelResponse:
        if len(request.messages) == 1:
            # Between two turns of the lead, `writer` appears in the catalog.
            project.agent("writer", tools="Read")
            call = ToolCall(id="c1", name="Read", arguments={"file_path": "x"})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        return ModelResponse(text="done")

    model = FunctionModel(lead)
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "go"))
    first, second = model.requests
    assert task_agent(first)["enum"] == ["reader"]
    assert task_agent(second)["enum"] == ["reader", "writer"]
