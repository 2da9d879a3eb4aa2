"""Where a budget comes from, at run time: the settings' ``[budget]`` bounds every top-level
run, a definition's ``budget:`` every run of that agent, each as its own ledger, within what
remains of the ancestors' (DESIGN rule 12)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from membrane import SubagentRuntime, SubagentStartRequest, Usage
from membrane.models import ModelRequest, ModelResponse, ToolCall
from membrane.testing import FunctionModel

from .conftest import write_agents


async def _reply(request: ModelRequest) -> ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if request.agent == "lead" and turn == 0:
        task = ToolCall("t", "Task", {"agent": "worker", "task": "read"})
        return ModelResponse(tool_calls=(task,), stop_reason="tool_calls", usage=Usage(1, 1))
    read = ToolCall(f"r{turn}", "Read", {"file_path": "notes.txt"})
    return ModelResponse(tool_calls=(read,), stop_reason="tool_calls", usage=Usage(1, 1))


@pytest.mark.anyio
async def test_the_settings_bound_top_level_runs_and_a_definition_its_agent(
    team: Path, tmp_path: Path
) -> None:
    write_agents(team, {"worker": "budget: {turns: 2}\n"})
    (team / ".membrane" / "config.toml").write_text("[budget]\nturns = 4\n", encoding="utf-8")
    with anyio.fail_after(60):
        async with SubagentRuntime.open(
            team, model=FunctionModel(_reply), state=tmp_path / "state.db"
        ) as runtime:
            result = await runtime.run(SubagentStartRequest("lead", "delegate"))
            (worker,) = [info for info in runtime.runs() if info.agent == "worker"]
    # The worker's own two turns ran out first (its parent read a child-failed result)...
    assert worker.result is not None and worker.result.error is not None
    assert worker.result.turns == 2
    assert (worker.result.error["data"]["kind"], worker.result.error["data"]["owner"]) == (
        "turns",
        worker.run_id,
    )
    # ...and its turns counted on the lead's four too: the lead had one left, then none.
    assert result.error is not None and result.turns == 2
    assert (result.error["data"]["kind"], result.error["data"]["owner"]) == ("turns", result.run_id)
