"""``max_foreground_children``: a fan-out of foreground ``Task`` calls runs at most that many
children at once, the rest wait for a slot (none fails), and a foreground child that starts a
foreground child of its own lends it its slot, so a cap of 1 never deadlocks a chain."""

from __future__ import annotations

import json

import anyio
import anyio.lowlevel
import pytest

from membrane.config.values import Settings
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.testing import FunctionModel

from .conftest import Project

FAN = 4


def _fan_out_model(busiest: list[int]) -> FunctionModel:
    """The lead calls ``Task`` four times in one turn; each worker's one request notes how
    many workers are answering at once."""
    in_flight = [0]

    async def respond(request: ModelRequest) -> ModelResponse:
        if request.agent == "lead":
            results = [m for m in request.messages if m.role == "tool"]
            if results:
                return ModelResponse(text=" | ".join(m.content for m in results))
            calls = tuple(
                ToolCall(id=f"t{n}", name="Task", arguments={"agent": "worker", "task": f"p{n}"})
                for n in range(FAN)
            )
            return ModelResponse(tool_calls=calls, stop_reason="tool_calls")
        in_flight[0] += 1
        busiest[0] = max(busiest[0], in_flight[0])
        for _ in range(50):
            await anyio.lowlevel.checkpoint()
        in_flight[0] -= 1
        return ModelResponse(text="part done")

    return FunctionModel(respond)


@pytest.mark.anyio
async def test_a_foreground_fan_out_runs_at_most_the_cap_and_every_child_finishes(
    project: Project,
) -> None:
    project.settings = Settings(max_foreground_children=2)
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker", tools="Read")
    busiest = [0]
    with anyio.fail_after(30):
        async with project.runtime(_fan_out_model(busiest)) as runtime:
            result = await runtime.run(SubagentStartRequest("lead", "split"))
            workers = [info for info in runtime.runs() if info.agent == "worker"]
    assert result.status == "completed"
    assert [json.loads(part)["status"] for part in result.text.split(" | ")] == ["completed"] * 4
    assert len(workers) == FAN
    assert busiest[0] == 2


@pytest.mark.anyio
async def test_without_a_cap_the_same_fan_out_runs_all_at_once(project: Project) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker", tools="Read")
    busiest = [0]
    with anyio.fail_after(30):
        async with project.runtime(_fan_out_model(busiest)) as runtime:
            await runtime.run(SubagentStartRequest("lead", "split"))
    assert busiest[0] == FAN


@pytest.mark.anyio
async def test_a_chain_of_foreground_children_under_a_cap_of_one_completes(
    project: Project,
) -> None:
    project.settings = Settings(max_foreground_children=1)
    project.agent("lead", tools="Read", allowed_subagents="[middle]")
    project.agent("middle", tools="Read", allowed_subagents="[leaf]")
    project.agent("leaf", tools="Read")
    below = {"lead": "middle", "middle": "leaf"}

    async def respond(request: ModelRequest) -> ModelResponse:
        if request.agent == "leaf" or any(m.role == "tool" for m in request.messages):
            return ModelResponse(text=f"{request.agent} done")
        call = ToolCall(
            id="t", name="Task", arguments={"agent": below[request.agent], "task": "go"}
        )
        return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")

    with anyio.fail_after(30):
        async with project.runtime(FunctionModel(respond)) as runtime:
            result = await runtime.run(SubagentStartRequest("lead", "go"))
            statuses = {info.agent: info.status for info in runtime.runs()}
    assert result.status == "completed"
    assert statuses == {"lead": "completed", "middle": "completed", "leaf": "completed"}
