"""Idempotent starts (DESIGN rule 8): a repeated ``request_id`` replays its receipt, across a
restart too, and an identical ``Task`` call is deduplicated."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane.errors import (
    ChildFailed,
    InvalidRequest,
    SetupFailed,
    StoreError,
    UnknownSubagent,
    UnsupportedCapability,
)
from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import InProcessProvider, SubagentStartRequest
from membrane.runtime.provider import ChildSpec, SetupCallback
from membrane.store import MemoryStore, SessionHeader, SQLiteStore, Store
from membrane.testing import FunctionModel, ScriptedModel, stored_receipt

from .conftest import Project, call_turn


@pytest.mark.anyio
async def test_a_repeated_request_id_returns_the_same_run_and_stores_one_session(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker")
    store = SQLiteStore(tmp_path / "state.db")
    model = ScriptedModel({"default": [{"text": "once"}]})
    request = SubagentStartRequest("worker", "task", request_id="req-1")
    async with project.runtime(model, store=store) as runtime:
        first = await runtime.start(request)
        second = await runtime.start(request)
        result = await runtime.wait(first.run_id)
        third = await runtime.start(request)
    assert first.run_id == second.run_id == third.run_id
    assert third.status == "completed" and third.result == result
    assert [h.session_id for h in store.list_sessions()] == [first.run_id]
    assert len(model.requests) == 1
    receipt = stored_receipt(store, "req-1")
    assert receipt is not None and receipt.status == "completed"
    assert receipt.result is not None and receipt.result["run"]["run_id"] == first.run_id


@pytest.mark.anyio
async def test_a_replay_after_a_restart_returns_the_stored_run_without_starting(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker")
    db = tmp_path / "state.db"
    request = SubagentStartRequest("worker", "task", request_id="req-1")
    async with project.runtime(
        ScriptedModel({"default": [{"text": "answer"}]}), store=SQLiteStore(db)
    ) as runtime:
        first = await runtime.run(request)
    fresh = ScriptedModel({"default": [{"text": "a second child"}]})
    store = SQLiteStore(db)
    async with project.runtime(fresh, store=store) as runtime:
        replayed = await runtime.start(request)
        rerun = await runtime.run(request)
        listed = runtime.runs()
    assert replayed.run_id == first.run_id and replayed.status == "completed"
    assert replayed.result is not None and replayed.result.text == "answer"
    assert rerun == replayed.result
    assert fresh.requests == [] and listed == []
    assert len(store.list_sessions()) == 1


@pytest.mark.anyio
async def test_a_failed_start_replays_its_failure_and_a_new_request_id_acts(
    project: Project,
) -> None:
    project.settings = dataclasses.replace(project.settings, fallback_subagent="none")
    model = ScriptedModel({"default": [{"text": "ok"}]})
    async with project.runtime(model) as runtime:
        with pytest.raises(UnknownSubagent):
            await runtime.start(SubagentStartRequest("late", "t", request_id="r1"))
        project.agent("late")
        with pytest.raises(UnknownSubagent) as replay:
            await runtime.start(SubagentStartRequest("late", "t", request_id="r1"))
        assert replay.value.data["replayed"] is True
        assert "new request_id" in replay.value.message
        assert runtime.runs() == []
        info = await runtime.start(SubagentStartRequest("late", "t", request_id="r2"))
        await runtime.wait(info.run_id)
    receipt = stored_receipt(runtime.store, "r1")
    assert receipt is not None and receipt.result is not None
    assert receipt.result["error"]["code"] == "unknown-subagent"
    assert [h.session_id for h in runtime.store.list_sessions()] == [info.run_id]


class _Slow(InProcessProvider):
    def __init__(self, model: ScriptedModel) -> None:
        super().__init__(model)
        self.gate = anyio.Event()
        self.builds = 0

    async def create(self, request: ChildSpec, setup: SetupCallback) -> Any:
        self.builds += 1
        await self.gate.wait()
        return await super().create(request, setup)


@pytest.mark.anyio
async def test_a_repeat_of_a_start_still_in_flight_waits_for_it_and_replays_it(
    project: Project,
) -> None:
    project.agent("worker")
    provider = _Slow(ScriptedModel({"default": [{"text": "ok"}]}))
    request = SubagentStartRequest("worker", "task", request_id="req-1")
    infos: list[str] = []
    async with project.runtime(provider) as runtime:

        async def start() -> None:
            infos.append((await runtime.start(request)).run_id)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(start)
                group.start_soon(start)
                await anyio.wait_all_tasks_blocked()
                provider.gate.set()
        sessions = runtime.store.list_sessions()
    assert provider.builds == 1
    assert len(infos) == 2 and infos[0] == infos[1]
    assert [h.session_id for h in sessions] == infos[:1]


@pytest.mark.anyio
async def test_an_identical_task_call_is_deduplicated_and_a_new_request_id_starts_another(
    project: Project,
) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker")
    task = {"agent": "worker", "task": "count", "background": True}
    model = ScriptedModel(
        {
            "agents": {
                "lead": [
                    call_turn("Task", **task),
                    call_turn("Task", **task),
                    call_turn("Task", **task, request_id="again"),
                    {"text": "done"},
                ],
                "worker": [{"text": "counted"}] * 2,
            }
        }
    )
    async with project.runtime(model) as runtime:
        lead = await runtime.run(SubagentStartRequest("lead", "go"))
        workers = runtime.runs(parent_id=lead.run_id)
    last = [r for r in model.requests if r.agent == "lead"][-1]
    started = [json.loads(m.content)["run_id"] for m in last.messages if m.role == "tool"]
    assert started[0] == started[1] != started[2]
    assert sorted(w.run_id for w in workers) == sorted(set(started))


@pytest.mark.anyio
async def test_identical_task_calls_of_two_parents_start_two_children(project: Project) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker")
    task = call_turn("Task", agent="worker", task="count", request_id="same")
    model = ScriptedModel(
        {"agents": {"lead": [task, {"text": "done"}] * 2, "worker": [{"text": "n"}] * 2}}
    )
    async with project.runtime(model) as runtime:
        for _ in range(2):
            await runtime.run(SubagentStartRequest("lead", "go"))
        workers = [info for info in runtime.runs() if info.agent == "worker"]
    assert len(workers) == 2 and workers[0].parent_id != workers[1].parent_id


class _FailsFirst(InProcessProvider):
    """Its first build fails with ``error``; later builds succeed."""

    def __init__(self, model: ScriptedModel, error: Exception) -> None:
        super().__init__(model)
        self.error = error
        self.builds = 0

    async def create(self, request: ChildSpec, setup: SetupCallback) -> Any:
        self.builds += 1
        if self.builds == 1:
            raise self.error
        return await super().create(request, setup)


@pytest.mark.anyio
async def test_a_start_that_failed_in_the_provider_is_retried_with_the_same_request_id(
    project: Project,
) -> None:
    project.agent("worker")
    provider = _FailsFirst(ScriptedModel({"default": [{"text": "ok"}]}), OSError("socket"))
    request = SubagentStartRequest("worker", "task", request_id="req-1")
    async with project.runtime(provider) as runtime:
        with pytest.raises(SetupFailed, match="socket") as failed:
            await runtime.start(request)
        assert "replayed" not in failed.value.data
        assert stored_receipt(runtime.store, "req-1") is None
        info = await runtime.start(request)
        assert (await runtime.wait(info.run_id)).text == "ok"
    assert provider.builds == 2
    receipt = stored_receipt(runtime.store, "req-1")
    assert receipt is not None and receipt.result is not None
    assert receipt.result["run"]["run_id"] == info.run_id


@pytest.mark.anyio
async def test_a_setup_failure_caused_by_a_config_error_is_replayed(project: Project) -> None:
    project.agent("worker")
    refusal = UnsupportedCapability("this deployment takes no such child", provider="p")
    provider = _FailsFirst(ScriptedModel({"default": [{"text": "ok"}]}), refusal)
    request = SubagentStartRequest("worker", "task", request_id="req-1")
    async with project.runtime(provider) as runtime:
        with pytest.raises(SetupFailed):
            await runtime.start(request)
        with pytest.raises(SetupFailed) as replay:
            await runtime.start(request)
        assert runtime.runs() == []
    assert replay.value.data["replayed"] is True
    assert replay.value.data["cause"] == "unsupported-capability"
    assert provider.builds == 1


@pytest.mark.anyio
async def test_a_start_whose_publication_hit_a_store_error_is_retried(project: Project) -> None:
    project.agent("worker")

    class FlakyStore(MemoryStore):
        failures = 1

        def create_session(self, header: SessionHeader) -> None:
            if self.failures:
                self.failures -= 1
                raise StoreError("the disk is full")
            super().create_session(header)

    store = FlakyStore()
    request = SubagentStartRequest("worker", "task", request_id="req-1")
    async with project.runtime(ScriptedModel({"default": [{"text": "ok"}]}), store=store) as rt:
        with pytest.raises(StoreError, match="disk is full"):
            await rt.start(request)
        assert stored_receipt(store, "req-1") is None and store.list_sessions() == []
        info = await rt.start(request)
        await rt.wait(info.run_id)
    assert [h.session_id for h in store.list_sessions()] == [info.run_id]


@pytest.mark.anyio
async def test_a_cancelled_start_releases_its_receipt_so_a_retry_acts(project: Project) -> None:
    project.agent("worker")
    provider = _Slow(ScriptedModel({"default": [{"text": "ok"}]}))
    request = SubagentStartRequest("worker", "task", request_id="req-1")
    async with project.runtime(provider) as runtime:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(runtime.start, request)
                await anyio.wait_all_tasks_blocked()
                assert stored_receipt(runtime.store, "req-1") is not None
                group.cancel_scope.cancel()
        assert stored_receipt(runtime.store, "req-1") is None
        assert runtime.runs() == []
        provider.gate.set()
        info = await runtime.start(request)
        await runtime.wait(info.run_id)
    assert provider.builds == 2


@pytest.mark.anyio
async def test_a_start_refused_because_its_parent_is_stopping_releases_its_receipt(
    project: Project,
) -> None:
    project.agent("lead")
    project.agent("worker")
    gate = anyio.Event()

    class GatesWorkers(InProcessProvider):
        async def create(self, request: ChildSpec, setup: SetupCallback) -> Any:
            if request.agent == "worker":
                await gate.wait()
            return await super().create(request, setup)

    release = anyio.Event()

    async def lead_waits(model_request: ModelRequest) -> ModelResponse:
        await release.wait()
        return ModelResponse("done")

    async with project.runtime(GatesWorkers(FunctionModel(lead_waits))) as runtime:
        lead = await runtime.start(SubagentStartRequest("lead", "lead", background=True))
        child = SubagentStartRequest("worker", "t", parent_id=lead.run_id, request_id="req-1")
        refused: list[InvalidRequest] = []

        async def start_child() -> None:
            with pytest.raises(InvalidRequest) as caught:
                await runtime.start(child)
            refused.append(caught.value)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(start_child)
                await anyio.wait_all_tasks_blocked()
                await runtime.stop(lead.run_id)
                gate.set()
    assert refused[0].data["transient"] is True
    assert "is stopping" in refused[0].message or "has ended" in refused[0].message
    assert stored_receipt(runtime.store, "req-1") is None
    assert [h.agent for h in runtime.store.list_sessions()] == ["lead"]


def _interrupted_run(store: Store, *, background: bool) -> None:
    """What a process that crashed mid-run leaves: a header still ``running`` and the
    completed receipt of the start that published it."""
    store.create_session(SessionHeader("w-1", "worker", None, 0, "running"))
    stored = {
        "run_id": "w-1",
        "agent": "worker",
        "agent_type": "worker",
        "parent_id": None,
        "depth": 0,
        "status": "running",
        "background": background,
        "provider": "in-process:spawn",
    }
    store.begin_receipt("req-1", kind="spawn")
    store.complete_receipt("req-1", {"run": stored})


@pytest.mark.anyio
async def test_replaying_a_foreground_start_whose_run_was_interrupted_is_child_failed(
    project: Project,
) -> None:
    project.agent("worker")
    model = ScriptedModel({"default": [{"text": "a second child"}]})
    request = SubagentStartRequest("worker", "task", request_id="req-1")
    async with project.runtime(model) as runtime:
        _interrupted_run(runtime.store, background=False)
        with pytest.raises(ChildFailed, match="was interrupted") as started:
            await runtime.start(request)
        with pytest.raises(ChildFailed, match="resume the run"):
            await runtime.run(request)
        assert runtime.runs() == []
    data = started.value.data
    assert (data["run_id"], data["status"], data["interrupted"]) == ("w-1", "running", True)
    assert model.requests == []
    assert [h.session_id for h in runtime.store.list_sessions()] == ["w-1"]


@pytest.mark.anyio
async def test_replaying_a_background_start_whose_run_was_interrupted_reports_its_status(
    project: Project,
) -> None:
    project.agent("worker")
    request = SubagentStartRequest("worker", "task", request_id="req-1", background=True)
    async with project.runtime(ScriptedModel({"default": [{"text": "x"}]})) as runtime:
        _interrupted_run(runtime.store, background=True)
        info = await runtime.start(request)
    assert (info.run_id, info.status, info.result) == ("w-1", "running", None)
