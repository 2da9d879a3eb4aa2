"""Ended runs leave the runtime's memory (the store keeps them and answers for them), and
``runs()`` pages over this runtime's runs."""

from __future__ import annotations

import gc
from pathlib import Path

import anyio
import pytest

from membrane.errors import InvalidRequest, UnknownRun
from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import SubagentStartRequest
from membrane.store import SQLiteStore

from .conftest import Project

pytestmark = pytest.mark.anyio


class _Answers:
    """A model that answers every request at once and keeps nothing of it."""

    name = "answers"

    async def request(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(text=f"{request.agent} done")


async def test_ended_runs_leave_memory_so_a_long_lived_runtime_holds_no_more_per_run(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker", tools="Read")
    store = SQLiteStore(tmp_path / "state.db")
    async with project.runtime(_Answers(), store=store) as runtime:  # type: ignore[arg-type]
        with anyio.fail_after(60):
            for i in range(20):
                await runtime.run(SubagentStartRequest("worker", f"warm {i}"))
            gc.collect()
            before = len(gc.get_objects())
            for i in range(200):
                result = await runtime.run(SubagentStartRequest("worker", f"job {i}"))
                assert result.text == "worker done"
            gc.collect()
            grown = len(gc.get_objects()) - before
        # Held for the runtime's life, an ended run kept about 20 objects (its record, loop,
        # scope, conversation and result): 4,000 here.
        assert grown < 200, grown
        assert len(runtime.runs()) == 220
    store.close()


async def test_an_ended_run_that_left_memory_answers_from_the_store(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker", tools="Read")
    store = SQLiteStore(tmp_path / "state.db")
    async with project.runtime(_Answers(), store=store) as runtime:  # type: ignore[arg-type]
        with anyio.fail_after(20):
            info = await runtime.start(SubagentStartRequest("worker", "look", background=True))
            await runtime.wait(info.run_id)
            got = runtime.get(info.run_id)
            assert got.status == "completed" and got.background and got.agent_type == "worker"
            assert got.result is not None and got.result.text == "worker done"
            assert (await runtime.wait(info.run_id)).text == "worker done"
            [waited] = await runtime.wait_all([info.run_id], timeout=5)
            assert waited.status == "completed"
            assert (await runtime.stop(info.run_id)).status == "completed"
            with pytest.raises(InvalidRequest, match="has ended"):
                runtime.steer(info.run_id, "more")
            # Nothing is started under it: it has ended, as when it was held in memory.
            with pytest.raises(InvalidRequest, match="has ended"):
                await runtime.start(SubagentStartRequest("worker", "orphan", parent_id=info.run_id))
            with pytest.raises(UnknownRun):
                runtime.get(info.run_id, caller="someone-else")
    store.close()


async def test_runs_pages_in_the_order_the_store_recorded_them_and_only_this_runtimes(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker", tools="Read")
    path = tmp_path / "state.db"
    store = SQLiteStore(path)
    async with project.runtime(_Answers(), store=store) as runtime:  # type: ignore[arg-type]
        with anyio.fail_after(20):
            started = [
                (await runtime.start(SubagentStartRequest("worker", f"job {i}"))).run_id
                for i in range(5)
            ]
            for run_id in started:
                await runtime.wait(run_id)
        assert [info.run_id for info in runtime.runs()] == started
        first = runtime.runs(limit=2)
        assert [info.run_id for info in first] == started[:2]
        second = runtime.runs(limit=2, after=first[-1].run_id)
        assert [info.run_id for info in second] == started[2:4]
        assert [info.run_id for info in runtime.runs(after=started[-1])] == []
        assert all(info.status == "completed" for info in runtime.runs())
        with pytest.raises(InvalidRequest):
            runtime.runs(limit=0)
        with pytest.raises(UnknownRun):
            runtime.runs(after="no-such-run")
    store.close()
    store = SQLiteStore(path)
    async with project.runtime(_Answers(), store=store) as again:  # type: ignore[arg-type]
        # Another runtime over the same store lists only what it published itself.
        assert again.runs() == []
        with pytest.raises(UnknownRun):
            again.get(started[0])
    store.close()
