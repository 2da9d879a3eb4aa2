"""``start_many`` and starts acknowledged at commit, on a real SQLite file under ``full``: a
batch publishes every child behind one sync (a stalled sync holds the batch's return, not its
publications), no child asks its model before its start is durable, request ids stay
idempotent per child, and a failing start ends the batch naming the children it started."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest
from tests.store.test_sqlite_flush import Disk

from membrane.durable.runs import RunInfo
from membrane.errors import InvalidRequest, StoreError, UnknownRun
from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import SubagentStartRequest
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel

from .conftest import Project

pytestmark = pytest.mark.anyio


def _asked(into: list[str]) -> FunctionModel:
    """A model that records the run of every request and answers ``done``."""

    async def answer(request: ModelRequest) -> ModelResponse:
        into.append(request.run_id)
        return ModelResponse(text="done")

    return FunctionModel(answer)


def _batch(count: int, *, ids: str | None = None) -> list[SubagentStartRequest]:
    return [
        SubagentStartRequest(
            "worker",
            f"job {n}",
            background=True,
            request_id=None if ids is None else f"{ids}-{n}",
        )
        for n in range(count)
    ]


async def test_a_batch_publishes_every_child_behind_one_stalled_sync(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker")
    asked: list[str] = []
    disk = Disk()
    store = SQLiteStore(tmp_path / "state.db", fsync=disk.fsync)
    async with project.runtime(_asked(asked), store=store) as runtime:
        with anyio.fail_after(60):
            disk.stall()
            returned: list[list[RunInfo]] = []

            async def start_batch() -> None:
                returned.append(await runtime.start_many(_batch(12, ids="batch")))

            async with anyio.create_task_group() as group:
                group.start_soon(start_batch)
                try:
                    await disk.stalled()
                    await anyio.wait_all_tasks_blocked()
                    published = len(runtime.runs())
                    held = (len(returned), len(asked))
                finally:
                    disk.release()
                # Every child of the batch is committed while the one sync is held; sequential
                # durable starts would each have waited for it.
                assert published == 12
                # Not returned, and no child asked its model before its start was durable.
                assert held == (0, 0)
            infos = returned[0]
            assert len({info.run_id for info in infos}) == 12
            results = [await runtime.wait(info.run_id) for info in infos]
    store.close()
    assert [result.status for result in results] == ["completed"] * 12
    assert sorted(asked) == sorted(info.run_id for info in infos)


async def test_a_start_acknowledged_at_commit_returns_before_its_sync_and_its_child_waits(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker")
    asked: list[str] = []
    disk = Disk()
    store = SQLiteStore(tmp_path / "state.db", fsync=disk.fsync)
    async with project.runtime(_asked(asked), store=store) as runtime:
        with anyio.fail_after(60):
            disk.stall()
            request = SubagentStartRequest("worker", "job", background=True, request_id="c1")
            info = await runtime.start(request, acknowledge="commit")
            await disk.stalled()
            await anyio.wait_all_tasks_blocked()
            assert runtime.get(info.run_id).status == "running"
            assert asked == []
            disk.release()
            result = await runtime.wait(info.run_id)
    store.close()
    assert result.status == "completed"
    assert asked == [info.run_id]
    with sqlite3.connect(tmp_path / "state.db") as conn:
        (status,) = conn.execute("SELECT status FROM receipts WHERE request_id = 'c1'").fetchone()
    assert status == "completed"


async def test_a_repeated_batch_replays_each_child_by_its_request_id(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker")
    asked: list[str] = []
    store = SQLiteStore(tmp_path / "state.db")
    async with project.runtime(_asked(asked), store=store) as runtime:
        with anyio.fail_after(60):
            first = await runtime.start_many(_batch(3, ids="r"))
            for info in first:
                await runtime.wait(info.run_id)
            # The same three ids and two new ones: three replays, two new children.
            again = await runtime.start_many(_batch(5, ids="r"))
            for info in again:
                await runtime.wait(info.run_id)
    sessions = store.list_sessions()
    store.close()
    assert [info.run_id for info in again[:3]] == [info.run_id for info in first]
    assert len({info.run_id for info in again}) == 5
    assert len(sessions) == 5
    assert len(asked) == 5


async def test_a_start_that_fails_mid_batch_names_the_children_already_started(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker")
    asked: list[str] = []
    store = SQLiteStore(tmp_path / "state.db")
    async with project.runtime(_asked(asked), store=store) as runtime:
        with anyio.fail_after(60):
            batch = [
                SubagentStartRequest("worker", "one", background=True),
                SubagentStartRequest("worker", "two", background=True, parent_id="no-such-run"),
                SubagentStartRequest("worker", "three", background=True),
            ]
            with pytest.raises(UnknownRun) as failed:
                await runtime.start_many(batch)
            started = failed.value.data["started"]
            assert isinstance(started, list) and len(started) == 1
            assert (await runtime.wait(started[0])).status == "completed"
            assert [info.run_id for info in runtime.runs()] == started
    store.close()


async def test_a_bad_request_fails_the_batch_before_anything_is_published(
    project: Project,
) -> None:
    project.agent("worker")
    asked: list[str] = []
    async with project.runtime(_asked(asked)) as runtime:
        bad = [*_batch(2), "worker"]
        with pytest.raises(InvalidRequest):
            await runtime.start_many(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest) as wrong:
            await runtime.start(_batch(1)[0], acknowledge="later")  # type: ignore[arg-type]
        assert wrong.value.data["field"] == "acknowledge"
        assert runtime.runs() == []
    assert asked == []


async def test_a_child_whose_start_cannot_be_synced_ends_store_error_before_its_model(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker")
    asked: list[str] = []

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    store = SQLiteStore(tmp_path / "state.db", fsync=broken)
    async with project.runtime(_asked(asked), store=store) as runtime:
        with anyio.fail_after(60):
            request = SubagentStartRequest("worker", "job", background=True)
            info = await runtime.start(request, acknowledge="commit")
            with pytest.raises(StoreError):
                await runtime.wait(info.run_id)  # its end is not durable either
            ended = runtime.get(info.run_id)
    store.close()
    assert asked == []
    assert ended.status == "error"
    assert ended.result.error is not None and ended.result.error["code"] == "store-error"


async def test_a_batch_acknowledged_at_commit_returns_before_its_sync_and_no_child_runs_first(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker")
    asked: list[str] = []
    disk = Disk()
    store = SQLiteStore(tmp_path / "state.db", fsync=disk.fsync)
    async with project.runtime(_asked(asked), store=store) as runtime:
        with anyio.fail_after(60):
            disk.stall()
            try:
                infos = await runtime.start_many(_batch(5, ids="c"), acknowledge="commit")
                await disk.stalled()
                await anyio.wait_all_tasks_blocked()
                held = len(asked)
            finally:
                disk.release()
            results = [await runtime.wait(info.run_id) for info in infos]
    store.close()
    assert held == 0
    assert [result.status for result in results] == ["completed"] * 5
    assert sorted(asked) == sorted(info.run_id for info in infos)
