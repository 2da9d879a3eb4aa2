"""Concurrent children share one token budget (DESIGN rule 12), through the public API on a
real state file: the tree as a whole never spends more than the budget plus one response,
whatever the interleaving, and each run that reached the empty budget ends with
``budget-exceeded``."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from membrane import SQLiteStore, SubagentRuntime, SubagentStartRequest, Usage
from membrane.models import ModelRequest, ModelResponse, ToolCall
from membrane.testing import FunctionModel

WORKERS = 4
LIMIT = 1000
RESPONSE = Usage(input_tokens=70, output_tokens=30)
LEAD_RESPONSE = Usage(input_tokens=8, output_tokens=2)


def _model(held: list[str]) -> FunctionModel:
    # The workers spend only once the lead waits for them (TaskWait): the lead then ends after
    # them, whatever the machine's load, so its subtree usage counts every one of them.
    waiting = anyio.Event()

    async def reply(request: ModelRequest) -> ModelResponse:
        if request.agent == "lead":
            response = _lead(request)
            if any(call.name == "TaskWait" for call in response.tool_calls):
                waiting.set()
            return response
        await waiting.wait()
        # Each worker's turn takes a different number of scheduling rounds, so the workers'
        # requests overlap and interleave rather than taking turns.
        turn = sum(1 for m in request.messages if m.role == "assistant")
        part = int(request.messages[0].content.rsplit(" ", 1)[-1])
        if part == 0 and turn:
            # This worker's second request is in flight when the budget runs out, however the
            # others interleave: it must be cancelled, never answered, and never charged.
            held.append(request.run_id)
            await anyio.sleep_forever()
        for _ in range(1 + (part * 3 + turn) % 5):
            await anyio.lowlevel.checkpoint()
        call = ToolCall(id=f"read-{turn}", name="Read", arguments={"file_path": "notes.txt"})
        return ModelResponse(tool_calls=(call,), stop_reason="tool_calls", usage=RESPONSE)

    return FunctionModel(reply)


def _lead(request: ModelRequest) -> ModelResponse:
    results = [m for m in request.messages if m.role == "tool"]
    if not results:
        calls = tuple(
            ToolCall(
                id=f"task-{n}",
                name="Task",
                arguments={"agent": "worker", "task": f"part {n}", "background": True},
            )
            for n in range(WORKERS)
        )
        return ModelResponse(tool_calls=calls, stop_reason="tool_calls", usage=LEAD_RESPONSE)
    if len(results) == WORKERS:
        ids = [json.loads(m.content)["run_id"] for m in results]
        wait = ToolCall(id="wait", name="TaskWait", arguments={"ids": ids})
        return ModelResponse(tool_calls=(wait,), stop_reason="tool_calls", usage=LEAD_RESPONSE)
    return ModelResponse(text="all parts done", usage=LEAD_RESPONSE)


@pytest.mark.anyio
async def test_concurrent_children_never_overspend_a_shared_budget_by_more_than_a_response(
    team: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state.db"
    held: list[str] = []
    request = SubagentStartRequest("lead", "split the work", budget={"tokens": LIMIT})
    with anyio.fail_after(60):
        async with SubagentRuntime.open(team, model=_model(held), state=state) as runtime:
            result = await runtime.run(request)
            runs = {info.run_id: info for info in runtime.runs()}

    store = SQLiteStore(state)
    try:
        spent = sum(
            event.data["input_tokens"] + event.data["output_tokens"]
            for event in store.events()
            if event.kind == "usage"
        )
        ledger = store.get_header(result.run_id).meta["budget"]  # type: ignore[union-attr]
        counts: dict[str, tuple[int, int]] = {}
        for event in store.events():
            turns, usages = counts.get(event.session_id, (0, 0))
            turns += event.kind == "turn"
            usages += event.kind == "usage"
            counts[event.session_id] = (turns, usages)
    finally:
        store.close()

    biggest = RESPONSE.total_tokens
    assert LIMIT <= spent <= LIMIT + biggest
    assert ledger["limit"] == {"tokens": LIMIT} and ledger["used"]["tokens"] == spent
    assert result.usage_total is not None and result.usage_total.total_tokens == spent
    workers = [info for info in runs.values() if info.agent == "worker"]
    assert len(workers) == WORKERS
    for info in [*workers, runs[result.run_id]]:
        assert info.result is not None and info.status == "error"
        error = info.result.error or {}
        assert error["code"] == "budget-exceeded"
        assert (error["data"]["kind"], error["data"]["owner"]) == ("tokens", result.run_id)
    # Other workers had a request in flight when the budget ran out: theirs were cancelled,
    # never answered (a turn without usage), which is what keeps the overspend to one response.
    unanswered = [run_id for run_id, (turns, usages) in counts.items() if turns > usages]
    assert len(held) == 1 and held[0] in unanswered
    assert set(unanswered) <= {info.run_id for info in workers}


MANY = 500
MANY_LIMIT = 20_000
SMALL_RESPONSE = Usage(input_tokens=10, output_tokens=5)


def _crowd_model() -> FunctionModel:
    # 500 workers each answer every turn with a Read and 15 tokens, after a different number
    # of scheduling rounds, so hundreds of requests are in flight when the budget runs out.
    waiting = anyio.Event()

    async def reply(request: ModelRequest) -> ModelResponse:
        if request.agent == "lead":
            results = [m for m in request.messages if m.role == "tool"]
            if not results:
                calls = tuple(
                    ToolCall(
                        id=f"task-{n}",
                        name="Task",
                        arguments={"agent": "worker", "task": f"part {n}", "background": True},
                    )
                    for n in range(MANY)
                )
                return ModelResponse(
                    tool_calls=calls, stop_reason="tool_calls", usage=LEAD_RESPONSE
                )
            if len(results) == MANY:
                waiting.set()
                ids = [json.loads(m.content)["run_id"] for m in results]
                wait = ToolCall(id="wait", name="TaskWait", arguments={"ids": ids})
                return ModelResponse(
                    tool_calls=(wait,), stop_reason="tool_calls", usage=LEAD_RESPONSE
                )
            return ModelResponse(text="all parts done", usage=LEAD_RESPONSE)
        await waiting.wait()
        turn = sum(1 for m in request.messages if m.role == "assistant")
        part = int(request.messages[0].content.rsplit(" ", 1)[-1])
        for _ in range((part * 7 + turn) % 5):
            await anyio.lowlevel.checkpoint()
        call = ToolCall(id=f"read-{turn}", name="Read", arguments={"file_path": "notes.txt"})
        return ModelResponse(tool_calls=(call,), stop_reason="tool_calls", usage=SMALL_RESPONSE)

    return FunctionModel(reply)


@pytest.mark.anyio
async def test_500_concurrent_children_overspend_a_20000_token_budget_by_at_most_a_response(
    team: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state.db"
    request = SubagentStartRequest("lead", "split the work", budget={"tokens": MANY_LIMIT})
    with anyio.fail_after(600):
        async with SubagentRuntime.open(team, model=_crowd_model(), state=state) as runtime:
            result = await runtime.run(request)
            workers = [info for info in runtime.runs() if info.agent == "worker"]

    store = SQLiteStore(state)
    try:
        spent = sum(
            event.data["input_tokens"] + event.data["output_tokens"]
            for event in store.events()
            if event.kind == "usage"
        )
        ledger = store.get_header(result.run_id).meta["budget"]  # type: ignore[union-attr]
    finally:
        store.close()

    # The ledger is exact (every response counted once) and past the limit by less than the
    # largest response: the one that crossed it. Every other request in flight was cancelled.
    assert ledger["used"]["tokens"] == spent
    assert MANY_LIMIT <= spent < MANY_LIMIT + SMALL_RESPONSE.total_tokens
    assert len(workers) == MANY and ledger["used"]["children"] == MANY
    codes = {(info.result.error or {}).get("code") for info in workers if info.result}
    assert codes == {"budget-exceeded"}
