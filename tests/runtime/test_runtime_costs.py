"""What the runtime costs per start, per turn and per finished child, counted (statements and
commits on a real SQLite file), never timed; and events that reach the store while a child
never yields to the event loop."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import anyio
import pytest
from tests.runtime.conftest import Project

from membrane.config.values import Settings
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel, stored_receipt

pytestmark = pytest.mark.anyio


def _done() -> FunctionModel:
    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="done")

    return FunctionModel(answer)


@pytest.fixture(autouse=True)
def _no_sweeps_while_counting(project: Project) -> None:
    """The sweeper renews leases on a timer; counted statements must be the start's own."""
    project.settings = dataclasses.replace(
        project.settings, lease_seconds=3600.0, sweep_interval_seconds=3600.0
    )


def _verbs(statements: list[str]) -> list[str]:
    return [text.split()[0].upper() for text in statements]


async def test_a_start_is_one_commit_of_two_rows_and_a_finish_one_more(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker", tools="Read")
    statements: list[str] = []
    store = SQLiteStore(tmp_path / "state.db", trace=statements.append)
    async with project.runtime(_done(), store=store) as runtime:
        await runtime.run(SubagentStartRequest("worker", "warm up"))
        statements.clear()
        info = await runtime.start(SubagentStartRequest("worker", "go", background=True))
        # The header, the run's lease and the published event, in one transaction.
        assert _verbs(statements) == ["BEGIN", "INSERT", "INSERT", "INSERT", "COMMIT"]
        statements.clear()
        await runtime.wait(info.run_id)
        finish = _verbs(statements)
    # One turn: its turn and usage events, the status, one insert of the transcript (its
    # length check in it), the lease's release, the end event, all in one commit; no read.
    assert finish.count("COMMIT") == 1
    assert "SAVEPOINT" not in finish
    assert "SELECT" not in finish
    assert len(finish) <= 8, statements


async def test_a_start_with_a_request_id_adds_its_receipt_and_no_read(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker", tools="Read")
    statements: list[str] = []
    store = SQLiteStore(tmp_path / "state.db", trace=statements.append)
    async with project.runtime(_done(), store=store) as runtime:
        await runtime.run(SubagentStartRequest("worker", "warm up"))
        statements.clear()
        request = SubagentStartRequest("worker", "go", background=True, request_id="r1")
        info = await runtime.start(request)
        # The pending receipt, then the publication completing it in one UPDATE that returns
        # the row: no SELECT of it afterwards.
        assert _verbs(statements) == [
            *("BEGIN", "INSERT", "COMMIT"),
            *("BEGIN", "INSERT", "INSERT", "INSERT", "UPDATE", "COMMIT"),
        ]
        await runtime.wait(info.run_id)
        statements.clear()
        replayed = await runtime.start(request)
        assert replayed.run_id == info.run_id
    receipt = stored_receipt(store, "r1")
    assert receipt is not None and receipt.status == "completed"
    assert receipt.result is not None and receipt.result["run"]["run_id"] == info.run_id


async def test_each_turn_is_one_commit_with_its_events_and_transcript(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker", tools="Read")
    turns = 6
    statements: list[str] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        turn = sum(1 for m in request.messages if m.role == "assistant") + 1
        if turn < turns:
            return ModelResponse(
                tool_calls=(ToolCall(f"c{turn}", "Read", {"path": "a"}),),
                stop_reason="tool_calls",
            )
        return ModelResponse(text="done")

    store = SQLiteStore(tmp_path / "state.db", trace=statements.append)
    async with project.runtime(FunctionModel(answer), store=store) as runtime:
        await runtime.run(SubagentStartRequest("worker", "warm up"))
        statements.clear()
        result = await runtime.run(SubagentStartRequest("worker", "go"))
        assert result.turns == turns
        # The start, one commit per turn after the first, the end.
        assert _verbs(statements).count("COMMIT") == 1 + (turns - 1) + 1
        assert "SELECT" not in _verbs(statements)  # an append reads nothing first
        stored = store.transcript(result.run_id)
    inserts = [s for s in statements if s.startswith("INSERT INTO messages")]
    assert len(inserts) == turns  # every message written exactly once, one INSERT per write
    assert len(stored) == 1 + 2 * (turns - 1) + 1


async def test_events_reach_the_store_while_a_child_never_yields(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker", tools="Read")
    turns = 300
    behind: list[int] = []
    store = SQLiteStore(tmp_path / "state.db", synchronous="normal")

    async def answer(request: ModelRequest) -> ModelResponse:
        # Never awaits: the runtime's writer task cannot run until the child ends.
        turn = sum(1 for m in request.messages if m.role == "assistant") + 1
        if turn > 1:
            stored = [e for e in store.events(session_id=request.run_id) if e.kind == "turn"]
            behind.append(turn - len(stored))
            assert store.transcript_length(request.run_id) == len(request.messages)
        if turn < turns:
            return ModelResponse(
                tool_calls=(ToolCall(f"c{turn}", "Read", {"path": "a"}),),
                stop_reason="tool_calls",
            )
        return ModelResponse(text="done")

    async with project.runtime(FunctionModel(answer), store=store) as runtime:
        events = runtime.events()
        result = await runtime.run(SubagentStartRequest("worker", "go"))
        assert result.status == "completed"
        received = []
        with anyio.fail_after(5):
            async for event in events:
                received.append(event)
                if event.kind == "completed":
                    break
    # Every turn's event was stored (and delivered) by the time the next model call came.
    assert behind and max(behind) == 0
    assert [e.kind for e in received].count("turn") == turns
    assert all(e.seq > 0 for e in received)


async def test_queue_positions_follow_admission_and_stops(project: Project) -> None:
    project.agent("worker", tools="Read")
    release = anyio.Event()

    async def answer(request: ModelRequest) -> ModelResponse:
        await release.wait()
        return ModelResponse(text="done")

    project.settings = Settings(max_concurrency=2)
    async with project.runtime(FunctionModel(answer)) as runtime:
        ids = [
            (await runtime.start(SubagentStartRequest("worker", f"j{i}", background=True))).run_id
            for i in range(8)
        ]

        def places() -> list[int | None]:
            listed = {info.run_id: info.queue_position for info in runtime.runs()}
            assert all(listed[i] == runtime.get(i).queue_position for i in ids)
            return [listed[i] for i in ids]

        assert places() == [None, None, 1, 2, 3, 4, 5, 6]
        await runtime.stop(ids[4])  # from the middle of the line
        assert places() == [None, None, 1, 2, None, 3, 4, 5]
        await runtime.stop(ids[2])  # from its head
        assert places() == [None, None, None, 1, None, 2, 3, 4]
        await runtime.stop(ids[0])  # a running one: the head is admitted
        assert places() == [None, None, None, None, None, 1, 2, 3]
        started = await runtime.start(SubagentStartRequest("worker", "late", background=True))
        assert started.queue_position == 4
        release.set()
        infos = await runtime.wait_all([*ids, started.run_id], timeout=10)
    assert all(info.status in ("completed", "stopped") for info in infos)
