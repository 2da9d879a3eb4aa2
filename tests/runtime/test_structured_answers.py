"""Structured final answers are strict JSON: a value no store or wire can carry (``NaN``,
``Infinity``, a number beyond a float) is a wrong answer the model is asked to correct, so a
run never ends with a result its durable row cannot hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrane.loop.agent_loop import AgentLoop
from membrane.runtime import SubagentStartRequest
from membrane.store import SQLiteStore
from membrane.testing import ScriptedModel
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import ToolContext

from .conftest import Project

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
async def test_a_non_finite_number_is_corrected_within_the_budget(value: str) -> None:
    model = ScriptedModel(
        {"default": [{"text": f'{{"score": {value}}}'}, {"text": '{"score": 0.5}'}]}
    )
    loop = AgentLoop(
        model=model,
        scope=Scope(ToolRegistry(), name="child"),
        agent="child",
        run_id="run-1",
        system="you are a child",
        task="score it",
        context=ToolContext(agent="child", run_id="run-1"),
        max_turns=5,
        response_schema=SCHEMA,
    )
    result = await loop.run()
    assert (result.status, result.structured, result.turns) == ("completed", {"score": 0.5}, 2)
    correction = model.requests[1].messages[-1]
    assert correction.role == "user" and "not JSON" in correction.content
    assert value.lstrip("-") in correction.content


async def test_a_nan_answer_never_leaves_the_durable_row_running(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker")
    store = SQLiteStore(tmp_path / "state.db")
    model = ScriptedModel({"default": [{"text": '{"score": NaN}'}, {"text": '{"score": 1}'}]})
    async with project.runtime(model, store=store) as runtime:
        result = await runtime.run(
            SubagentStartRequest("worker", "score it", response_schema=SCHEMA)
        )
    assert (result.status, result.structured) == ("completed", {"score": 1})
    header = store.get_header(result.run_id)
    assert header is not None and header.status == "completed"
