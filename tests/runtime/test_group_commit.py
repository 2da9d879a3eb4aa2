"""Store work off the event loop, through the runtime on a real SQLite file under ``full``: no
fsync on the loop's thread however many children and turns run; while the flusher's sync is
stalled, another child's turns and tool calls keep running and ``start()`` waits for the sync
before it returns; a ``kill -9`` during a stalled flush loses nothing that was committed, so a
restart keeps one child per request id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.store.test_sqlite_flush import Disk

from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel, stored_receipt
from membrane.tools.spec import Tool, ToolContext

from .conftest import Project

pytestmark = pytest.mark.anyio

DRIVER = Path(__file__).parent / "scripts" / "stalled_flush_driver.py"


def _probe(ran: list[str], probed: anyio.Event) -> Tool:
    async def handler(arguments: Mapping[str, Any], context: ToolContext) -> str:
        ran.append(str(context.run_id))
        probed.set()
        return "probed"

    return Tool(
        name="Probe",
        description="Records that it ran.",
        input_schema={"type": "object"},
        handler=handler,
        origin="host",
    )


def _turns(
    count: int, *, gate: dict[str, tuple[anyio.Event, anyio.Event]] | None = None
) -> FunctionModel:
    """Each agent calls ``Probe`` for ``count`` turns, then answers; an agent named in
    ``gate`` (asked, go) sets ``asked`` on its first request and waits for ``go`` to reply."""

    async def answer(request: ModelRequest) -> ModelResponse:
        done = sum(1 for message in request.messages if message.role == "tool")
        if done == 0 and gate is not None and request.agent in gate:
            asked, go = gate[request.agent]
            asked.set()
            await go.wait()
        if done < count:
            call = ToolCall(f"p{done}", "Probe", {})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        return ModelResponse(text=f"{request.agent} done")

    return FunctionModel(answer)


async def test_no_fsync_runs_on_the_loop_thread_however_many_children_and_turns(
    project: Project, tmp_path: Path
) -> None:
    ran: list[str] = []
    project.registry.register(_probe(ran, anyio.Event()))
    project.agent("worker", tools="Probe")
    disk = Disk()
    store = SQLiteStore(tmp_path / "state.db", fsync=disk.fsync)
    async with project.runtime(_turns(3), store=store) as runtime:
        with anyio.fail_after(60):
            results = [
                await runtime.run(SubagentStartRequest("worker", f"job {n}")) for n in range(4)
            ]
    store.close()
    assert [result.status for result in results] == ["completed"] * 4
    assert len(ran) == 12
    assert disk.threads, "the flusher made the commits durable"
    assert threading.get_ident() not in disk.threads


async def test_a_stalled_sync_stalls_no_other_child_and_start_waits_for_it(
    project: Project, tmp_path: Path
) -> None:
    ran: list[str] = []
    probed = anyio.Event()
    project.registry.register(_probe(ran, probed))
    project.agent("busy", tools="Probe")
    project.agent("late")
    asked, go = anyio.Event(), anyio.Event()
    disk = Disk()
    store = SQLiteStore(tmp_path / "state.db", fsync=disk.fsync)
    async with project.runtime(_turns(1, gate={"busy": (asked, go)}), store=store) as runtime:
        with anyio.fail_after(60):
            busy = await runtime.start(SubagentStartRequest("busy", "work", background=True))
            await asked.wait()  # its model request is in flight
            disk.stall()
            started: list[str] = []

            async def start_late() -> None:
                info = await runtime.start(
                    SubagentStartRequest("late", "wait", background=True, request_id="late-1")
                )
                started.append(info.run_id)

            async with anyio.create_task_group() as group:
                group.start_soon(start_late)
                await disk.stalled()
                await anyio.wait_all_tasks_blocked()
                # "late" is published (in the store and the listing) but not acknowledged.
                assert len(runtime.runs()) == 2
                assert not started
                # Meanwhile the loop runs "busy": its model answers, its tool call runs.
                go.set()
                await probed.wait()
                assert ran == [busy.run_id]
                await anyio.wait_all_tasks_blocked()
                assert not started
                disk.release()
            assert len(started) == 1
            assert (await runtime.wait(busy.run_id)).status == "completed"
            assert (await runtime.wait(started[0])).status == "completed"
    store.close()
    assert threading.get_ident() not in disk.threads


async def test_a_replayed_start_returns_only_once_what_was_committed_before_it_is_durable(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker")
    disk = Disk()
    store = SQLiteStore(tmp_path / "state.db", fsync=disk.fsync)
    async with project.runtime(_turns(0), store=store) as runtime:
        with anyio.fail_after(60):
            request = SubagentStartRequest("worker", "job", background=True, request_id="r1")
            first = await runtime.start(request)
            await runtime.wait(first.run_id)
            disk.stall()
            replayed: list[str] = []

            async def replay() -> None:
                replayed.append((await runtime.start(request)).run_id)

            async with anyio.create_task_group() as group:
                group.start_soon(replay)
                await disk.stalled()
                await anyio.wait_all_tasks_blocked()
                assert not replayed  # the replay waits for the sync, as a fresh start does
                disk.release()
            assert replayed == [first.run_id]
    store.close()


def test_a_kill_during_a_stalled_flush_keeps_one_child_per_request_id(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker")
    db = tmp_path / "state.db"
    env = {**os.environ, "MEMBRANE_HOME": str(project.home)}
    args = [sys.executable, str(DRIVER), str(db), str(project.root), str(project.home)]
    killed = subprocess.Popen(
        [*args, "stall"], stdout=subprocess.PIPE, text=True, env=env, stderr=subprocess.PIPE
    )
    assert killed.stdout is not None
    line = killed.stdout.readline()  # printed from inside the stalled sync, after the commit
    assert line.strip() == "stalled", (line, killed.stderr.read() if killed.stderr else "")
    killed.kill()
    assert killed.wait(timeout=60) == -9
    again = subprocess.run(
        [*args, "replay"], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert again.returncode == 0, again.stderr[-3000:]
    outcome = json.loads(again.stdout.splitlines()[-1])
    with SQLiteStore(db) as store:
        children = [h for h in store.list_sessions() if h.request_id == "spawn-1"]
        receipt = stored_receipt(store, "spawn-1")
    assert len(children) == 1
    assert outcome["run_id"] == children[0].session_id
    assert receipt is not None and receipt.status == "completed"
