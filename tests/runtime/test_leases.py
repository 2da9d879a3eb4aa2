"""Run leases and the sweeper (seed 002, DESIGN rule 8): stale pending receipts are reaped
after the TTL, one process drives a run, an expired lease is taken over, and a run whose
lease expired without an end is reconciled as ``interrupted`` with its parent notified."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane.durable.sweeper import Sweeper
from membrane.errors import RequestPending
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import InProcessProvider, SubagentStartRequest
from membrane.store import SessionHeader, SQLiteStore
from membrane.testing import FunctionModel, stored_lease
from membrane.tools.registry import ToolRegistry
from membrane.tools.spec import Tool, ToolContext

from .conftest import Project, after_leases_expire

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).parent / "scripts" / "lease_holder.py"
HOUR = 3600.0


async def _ok(request: ModelRequest) -> ModelResponse:
    return ModelResponse(text="ok")


async def _stored_run(project: Project, db: Path) -> str:
    """A run that ended in an earlier process: resumable."""
    project.agent("worker")
    store = SQLiteStore(db)
    async with project.runtime(InProcessProvider(FunctionModel(_ok)), store=store) as runtime:
        result = await runtime.run(SubagentStartRequest("worker", "first"))
    store.close()
    return result.run_id


async def test_a_pending_receipt_is_request_pending_until_the_ttl_then_reaped_and_acts(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker")
    db = tmp_path / "state.db"
    past = SQLiteStore(db, clock=lambda: time.time() - 16 * 60)  # a process that died 16 min ago
    past.begin_receipt("old", kind="spawn")
    past.close()
    store = SQLiteStore(db)
    store.begin_receipt("fresh", kind="spawn")  # a process that died a minute ago

    report = Sweeper(store).sweep()

    assert report.reaped == ("old",)
    model = FunctionModel(_ok)
    async with project.runtime(InProcessProvider(model), store=store) as runtime:
        with pytest.raises(RequestPending):
            await runtime.start(SubagentStartRequest("worker", "w", request_id="fresh"))
        with anyio.fail_after(20):
            first = await runtime.run(SubagentStartRequest("worker", "w", request_id="old"))
            again = await runtime.run(SubagentStartRequest("worker", "w", request_id="old"))
    assert first.run_id == again.run_id and len(store.list_sessions()) == 1
    store.close()


def _spawn(db: Path, project: Project, run_id: str) -> subprocess.Popen[str]:
    env = {**os.environ, "MEMBRANE_HOME": str(project.home)}
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(db), str(project.root), str(project.home), run_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _outcome(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, process.stderr.read() if process.stderr else ""
    found: dict[str, Any] = json.loads(line)
    return found


async def test_two_processes_racing_to_resume_one_run_exactly_one_drives_it(
    project: Project, tmp_path: Path
) -> None:
    db = tmp_path / "state.db"
    run_id = await _stored_run(project, db)
    processes = [_spawn(db, project, run_id) for _ in range(2)]
    try:
        with anyio.fail_after(60):
            outcomes = [await anyio.to_thread.run_sync(_outcome, p) for p in processes]
        assert sorted(o["outcome"] for o in outcomes) == ["drives", "run-leased"]
        (driver,) = [o for o in outcomes if o["outcome"] == "drives"]
        (refused,) = [o for o in outcomes if o["outcome"] == "run-leased"]
        assert refused["owner"] == driver["owner"]  # run-leased names the owner
        store = SQLiteStore(db)
        lease = stored_lease(store, run_id)
        assert lease is not None and lease.owner == driver["owner"]
        header = store.get_header(run_id)
        assert header is not None and header.status == "running"
        store.close()
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
            process.wait()

    # The driver was killed mid-run: once its lease expires, the sweeper reconciles the run
    # and a new process takes it over.
    later = after_leases_expire()
    store = SQLiteStore(db, clock=later)
    report = Sweeper(store, clock=later).sweep()
    assert report.interrupted == (run_id,)
    header = store.get_header(run_id)
    assert header is not None and header.status == "interrupted"
    assert "interrupted" in [e.kind for e in store.events(session_id=run_id)]
    async with project.runtime(InProcessProvider(FunctionModel(_ok)), store=store) as runtime:
        with anyio.fail_after(20):
            await runtime.resume(run_id, "once more")
            ended = await runtime.wait(run_id)
            assert ended.status == "completed", ended.error
    assert stored_lease(store, run_id) is None  # the end released it
    store.close()


async def test_an_interrupted_child_fails_its_edge_and_its_parent_is_told_once(
    project: Project, tmp_path: Path
) -> None:
    project.agent("lead")
    db = tmp_path / "state.db"
    store = SQLiteStore(db)
    seen: list[list[str]] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        seen.append([m.content for m in request.messages if m.role == "user"])
        return ModelResponse(text="noted")

    model = FunctionModel(answer)
    async with project.runtime(InProcessProvider(model), store=store) as runtime:
        lead = await runtime.run(SubagentStartRequest("lead", "lead the work"))
    # What a crashed process leaves: a child still running, its edge open, its lease expired.
    store.create_session(SessionHeader("w1", "worker", lead.run_id, 1, "running"))
    store.record_edge(
        parent_id=lead.run_id,
        child_id="w1",
        child_role="worker",
        brief_digest="d",
        spawn_fingerprint={"provider": "in-process:spawn"},
    )
    store.close()
    past = SQLiteStore(db, clock=lambda: time.time() - HOUR)
    past.claim_lease("w1", owner="crashed-host:1:dead", ttl=30)
    past.close()

    store = SQLiteStore(db)
    report = Sweeper(store).sweep()
    assert report.interrupted == ("w1",)
    assert Sweeper(store).sweep().interrupted == ()  # reconciled once
    (edge,) = store.edges(parent_id=lead.run_id)
    assert edge.status == "interrupted" and "crashed-host:1:dead" in (edge.result_summary or "")
    (item,) = store.pending_outbox(recipient=lead.run_id)
    assert (item.payload["kind"], item.payload["status"]) == ("status", "interrupted")

    async with project.runtime(InProcessProvider(model), store=store) as runtime:
        with anyio.fail_after(20):
            await runtime.resume(lead.run_id, "what happened?")
            await runtime.wait(lead.run_id)
    statuses = [text for text in seen[-1] if text.startswith("<task_status ")]
    assert len(statuses) == 1 and f'delivery="{item.id}"' in statuses[0]
    assert 'run_id="w1"' in statuses[0] and 'status="interrupted"' in statuses[0]
    stored = [str(m["content"]) for m in store.transcript(lead.run_id)]
    assert len([t for t in stored if t.startswith("<task_status ")]) == 1
    assert store.pending_outbox() == []
    store.close()


async def test_a_run_whose_lease_another_owner_took_is_stopped_here(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker", tools="Read")
    entered = anyio.Event()

    async def hold(arguments: Mapping[str, Any], context: ToolContext) -> str:
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    project.registry = ToolRegistry()
    project.registry.register(
        Tool(name="Read", description="Read.", input_schema={"type": "object"}, handler=hold)
    )

    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(tool_calls=(ToolCall("c", "Read", {}),), stop_reason="tool_calls")

    store = SQLiteStore(tmp_path / "state.db")
    async with project.runtime(InProcessProvider(FunctionModel(answer)), store=store) as runtime:
        with anyio.fail_after(20):
            info = await runtime.start(SubagentStartRequest("worker", "w", background=True))
            lease = stored_lease(store, info.run_id)
            assert lease is not None and lease.owner == runtime.sweeper.owner
            await entered.wait()
            # This process stalled past its lease and another one took the run over.
            store.release_lease(info.run_id, owner=runtime.sweeper.owner)
            store.claim_lease(info.run_id, owner="other-host:2:live", ttl=60)
            runtime.sweeper.renew()
            assert (await runtime.wait(info.run_id)).status == "stopped"
    store.close()


async def test_membrane_runs_names_the_process_holding_each_runs_lease(
    project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from membrane.cli.app import main

    project.agent("worker", tools="Read")
    entered = anyio.Event()

    async def hold(arguments: Mapping[str, Any], context: ToolContext) -> str:
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    project.registry = ToolRegistry()
    project.registry.register(
        Tool(name="Read", description="Read.", input_schema={"type": "object"}, handler=hold)
    )

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "quick":
            return ModelResponse(text="done")
        return ModelResponse(tool_calls=(ToolCall("c", "Read", {}),), stop_reason="tool_calls")

    project.agent("quick", tools="Read")
    state = tmp_path / "state.db"
    store = SQLiteStore(state)
    async with project.runtime(InProcessProvider(FunctionModel(answer)), store=store) as runtime:
        with anyio.fail_after(20):
            held = await runtime.start(SubagentStartRequest("worker", "w", background=True))
            await entered.wait()
            done = await runtime.start(SubagentStartRequest("quick", "other"))
            await runtime.wait(done.run_id)
            argv = ["runs", "--json", "--headless", "--project", str(project.root)]
            code = main([*argv, "--state", str(state)])
            listed = json.loads(capsys.readouterr().out)
    assert code == 0
    rows = {row["run_id"]: row for row in listed["runs"]}
    # The run being driven names its lease's owner; an ended one names nobody.
    assert rows[held.run_id]["held_by"] == runtime.sweeper.owner
    assert rows[held.run_id]["status"] == "running"
    assert rows[done.run_id]["held_by"] is None
    store.close()
