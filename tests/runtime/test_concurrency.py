"""The concurrency cap and nested background work: a run blocked on its own children lends
its slot, so a child queued behind that slot can run."""

from __future__ import annotations

import json
from collections.abc import Mapping

import anyio
import pytest

from membrane.config.values import Settings
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.testing import FunctionModel

from .conftest import Project


def _delegating(plan: Mapping[str, tuple[str, bool]]) -> FunctionModel:
    """A model where each agent in ``plan`` starts its child (in the background or not), waits
    for it with ``TaskWait`` when it is in the background, then answers; others answer."""

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent not in plan:
            return ModelResponse(text=f"{request.agent} done")
        child, background = plan[request.agent]
        results = [m for m in request.messages if m.role == "tool"]
        if not results:
            arguments = {"agent": child, "task": "work", "background": background}
            call = ToolCall("t1", "Task", arguments)
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        if background and len(results) == 1:
            run_id = json.loads(results[0].content)["run_id"]
            call = ToolCall("t2", "TaskWait", {"ids": [run_id]})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        return ModelResponse(text=f"{request.agent} done after {results[-1].content}")

    return FunctionModel(answer)


@pytest.mark.anyio
async def test_a_background_parent_waiting_on_its_queued_child_lends_its_only_slot(
    project: Project,
) -> None:
    project.settings = Settings(max_concurrency=1)
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker")
    async with project.runtime(_delegating({"lead": ("worker", True)})) as runtime:
        lead = await runtime.start(SubagentStartRequest("lead", "go", background=True))
        with anyio.fail_after(10):
            result = await runtime.wait(lead.run_id)
        runs = runtime.runs()
    assert result.status == "completed" and "worker done" in result.text
    assert [(r.agent, r.status) for r in runs] == [("lead", "completed"), ("worker", "completed")]


@pytest.mark.anyio
async def test_nested_background_waits_complete_under_a_cap_of_two(project: Project) -> None:
    project.settings = Settings(max_concurrency=2)
    project.agent("lead", tools="Read", allowed_subagents="[mid]")
    project.agent("mid", tools="Read", allowed_subagents="[leaf]")
    project.agent("leaf")
    model = _delegating({"lead": ("mid", True), "mid": ("leaf", True)})
    async with project.runtime(model) as runtime:
        leads = [
            await runtime.start(SubagentStartRequest("lead", f"go {i}", background=True))
            for i in range(2)
        ]
        with anyio.fail_after(10):
            results = [await runtime.wait(lead.run_id) for lead in leads]
        statuses = {r.status for r in runtime.runs()}
    assert [r.status for r in results] == ["completed", "completed"]
    assert all("mid done" in r.text for r in results)
    assert statuses == {"completed"}


@pytest.mark.anyio
async def test_a_background_parent_lends_its_slot_while_a_foreground_child_waits(
    project: Project,
) -> None:
    # lead (background, the only slot) -> mid in the foreground (no slot) -> leaf in the
    # background, which can only run on the slot lead holds while it waits for mid.
    project.settings = Settings(max_concurrency=1)
    project.agent("lead", tools="Read", allowed_subagents="[mid]")
    project.agent("mid", tools="Read", allowed_subagents="[leaf]")
    project.agent("leaf")
    model = _delegating({"lead": ("mid", False), "mid": ("leaf", True)})
    async with project.runtime(model) as runtime:
        lead = await runtime.start(SubagentStartRequest("lead", "go", background=True))
        with anyio.fail_after(10):
            result = await runtime.wait(lead.run_id)
    assert result.status == "completed" and "leaf done" in result.text


@pytest.mark.anyio
async def test_a_lent_slot_serves_the_queue_in_order_and_every_run_finishes(
    project: Project,
) -> None:
    project.settings = Settings(max_concurrency=1)
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker")
    project.agent("other")
    model = _delegating({"lead": ("worker", True)})
    async with project.runtime(model) as runtime:
        lead = await runtime.start(SubagentStartRequest("lead", "go", background=True))
        queued = await runtime.start(SubagentStartRequest("other", "later", background=True))
        assert queued.status == "queued"
        with anyio.fail_after(10):
            result = await runtime.wait(lead.run_id)
            other = await runtime.wait(queued.run_id)
    assert result.status == "completed" and other.status == "completed"
    first_turns = list(dict.fromkeys(request.agent for request in model.requests))
    assert first_turns == ["lead", "other", "worker"]
