"""Each kind of budget, through the public API on a real state file: the turn, the tool call or
the wall time past a budget is refused and ends its run with ``budget-exceeded``; a child that
crosses its own budget ends alone, its parent reading an error tool result (DESIGN rule 12)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from membrane import SQLiteStore, SubagentRuntime, SubagentStartRequest, Usage
from membrane.models import ModelRequest, ModelResponse, ToolCall
from membrane.testing import FunctionModel

READ = {"file_path": "notes.txt"}


def _reader(requests: list[str]) -> FunctionModel:
    """Every turn reads notes.txt (one call), 100 tokens a response."""

    async def reply(request: ModelRequest) -> ModelResponse:
        requests.append(request.run_id)
        turn = sum(1 for m in request.messages if m.role == "assistant")
        call = ToolCall(id=f"read-{turn}", name="Read", arguments=READ)
        return ModelResponse(tool_calls=(call,), stop_reason="tool_calls", usage=Usage(70, 30))

    return FunctionModel(reply)


@pytest.mark.anyio
async def test_the_turn_past_a_turns_budget_is_never_requested(team: Path, tmp_path: Path) -> None:
    requests: list[str] = []
    with anyio.fail_after(60):
        async with SubagentRuntime.open(
            team, model=_reader(requests), state=tmp_path / "state.db"
        ) as runtime:
            result = await runtime.run(SubagentStartRequest("lead", "read", budget={"turns": 3}))
    assert len(requests) == 3 and result.turns == 3
    assert result.status == "error" and result.error is not None
    assert (result.error["code"], result.error["data"]["kind"]) == ("budget-exceeded", "turns")
    assert (result.error["data"]["limit"], result.error["data"]["used"]) == (3, 3)


@pytest.mark.anyio
async def test_the_call_past_a_tool_calls_budget_is_not_run(team: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    requests: list[str] = []
    with anyio.fail_after(60):
        async with SubagentRuntime.open(team, model=_reader(requests), state=state) as runtime:
            request = SubagentStartRequest("lead", "read", budget={"tool_calls": 2})
            result = await runtime.run(request)
    assert result.status == "error" and result.error is not None
    assert (result.error["code"], result.error["data"]["kind"]) == ("budget-exceeded", "tool_calls")
    store = SQLiteStore(state)
    try:
        results = [
            e.data for e in store.events(session_id=result.run_id) if e.kind == "tool_result"
        ]
    finally:
        store.close()
    # Two calls ran; the third was answered with the error, and nothing came after it.
    assert [r["is_error"] for r in results] == [False, False, True]
    assert results[-1]["code"] == "budget-exceeded"
    assert len(requests) == 3


@pytest.mark.anyio
async def test_a_run_is_stopped_when_its_wall_time_runs_out(team: Path, tmp_path: Path) -> None:
    started = anyio.Event()

    async def hang(request: ModelRequest) -> ModelResponse:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    state = tmp_path / "state.db"
    with anyio.fail_after(60):
        async with SubagentRuntime.open(team, model=FunctionModel(hang), state=state) as runtime:
            request = SubagentStartRequest("lead", "wait", budget={"seconds": 0.2})
            result = await runtime.run(request)
    assert started.is_set()
    assert result.status == "error" and result.error is not None
    assert (result.error["code"], result.error["data"]["kind"]) == ("budget-exceeded", "seconds")
    store = SQLiteStore(state)
    try:
        ledger = store.get_header(result.run_id).meta["budget"]  # type: ignore[union-attr]
    finally:
        store.close()
    assert ledger["used"]["seconds"] >= 0.2 and ledger["used"]["turns"] == 1


@pytest.mark.anyio
async def test_a_child_crossing_its_own_budget_ends_alone(team: Path, tmp_path: Path) -> None:
    async def reply(request: ModelRequest) -> ModelResponse:
        if request.agent == "lead":
            results = [m for m in request.messages if m.role == "tool"]
            if results:
                return ModelResponse(text=json.dumps([r.is_error for r in results]))
            calls = (
                ToolCall(
                    "a", "Task", {"agent": "worker", "task": "small", "budget": {"tokens": 250}}
                ),
                ToolCall("b", "Task", {"agent": "worker", "task": "free"}),
            )
            return ModelResponse(tool_calls=calls, stop_reason="tool_calls")
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn == 4:
            return ModelResponse(text="worker done", usage=Usage(70, 30))
        call = ToolCall(id=f"read-{turn}", name="Read", arguments=READ)
        return ModelResponse(tool_calls=(call,), stop_reason="tool_calls", usage=Usage(70, 30))

    with anyio.fail_after(60):
        async with SubagentRuntime.open(
            team, model=FunctionModel(reply), state=tmp_path / "state.db"
        ) as runtime:
            result = await runtime.run(SubagentStartRequest("lead", "delegate"))
            workers = {
                info.result.text if info.status != "error" else "crossed": info
                for info in runtime.runs()
                if info.agent == "worker" and info.result is not None
            }
    # The small worker crossed its 250 tokens on its third response and ended; its parent read
    # an error tool result, the other worker finished, and so did the lead.
    assert result.status == "completed" and json.loads(result.text) == [True, False]
    crossed = workers["crossed"].result
    assert crossed is not None and crossed.error is not None
    assert crossed.error["code"] == "budget-exceeded"
    assert crossed.error["data"]["owner"] == workers["crossed"].run_id
    assert crossed.usage.total_tokens == 300
    assert workers["worker done"].status == "completed"
