"""A foreground fan-out: the Task calls of one turn start their children at once."""

from __future__ import annotations

import json

import anyio
import pytest

from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.testing import FunctionModel

from .conftest import Project

pytestmark = pytest.mark.anyio


async def test_three_task_calls_in_one_turn_run_their_children_side_by_side(
    project: Project,
) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[kid]")
    project.agent("kid", tools="Read")
    kids_asking: list[str] = []
    all_asking = anyio.Event()

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "lead":
            if any(m.role == "tool" for m in request.messages):
                return ModelResponse(text="all three answered")
            calls = tuple(
                ToolCall(f"t{n}", "Task", {"agent": "kid", "task": f"part {n}"}) for n in range(3)
            )
            return ModelResponse(tool_calls=calls, stop_reason="tool_calls")
        # Each child answers only once all three are waiting on the model: children started
        # one after another would never get here.
        kids_asking.append(request.messages[0].content)
        if len(kids_asking) == 3:
            all_asking.set()
        await all_asking.wait()
        return ModelResponse(text=f"done with {request.messages[0].content}")

    model = FunctionModel(answer)
    with anyio.fail_after(30):
        async with project.runtime(model) as runtime:
            lead = await runtime.run(SubagentStartRequest("lead", "split the work"))
    assert lead.status == "completed", lead.error
    assert sorted(kids_asking) == ["part 0", "part 1", "part 2"]
    lead_turns = [r for r in model.requests if r.agent == "lead"]
    answers = [m for m in lead_turns[-1].messages if m.role == "tool"]
    assert [m.tool_call_id for m in answers] == ["t0", "t1", "t2"]
    for n, message in enumerate(answers):
        assert json.loads(message.content)["text"] == f"done with part {n}"
