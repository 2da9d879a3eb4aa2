"""``provider = "dbos"`` and ``membrane worker``: a host publishes its children on the DBOS
queue and real worker processes drive them, on one shared SQLite state (tests/runtime/fleet.py).
Each child runs on exactly one worker and once per request id; a worker killed with SIGKILL in
the middle of a run loses nothing: the sweeper of another worker hands the run back to the
queue and it ends there, from its stored conversation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane import SubagentRuntime, SubagentStartRequest
from membrane.testing import stored_lease
from membrane.vocabulary import END_STATES

from .fleet import Fleet, WorkerProcess, write_project

pytestmark = pytest.mark.anyio

#: Every turn of every run: one Read, then the answer; each waits, as a model's turn would.
TURNS = [
    {"tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}], "delay": 0.3},
    {"text": "read the notes", "delay": 0.3},
]
SLOW_TURNS = [
    {"tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}], "delay": 1.5},
    {"text": "read the notes", "delay": 1.5},
]


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    made = Fleet(tmp_path, write_project(tmp_path, turns=TURNS))
    try:
        yield made
    finally:
        made.stop()


def _request(index: int) -> SubagentStartRequest:
    return SubagentStartRequest(
        agent_type="helper", task=f"read the notes ({index})", request_id=f"job-{index}",
        background=True,
    )  # fmt: skip


def _host(fleet: Fleet) -> SubagentRuntime:
    return SubagentRuntime.open(fleet.project, state=fleet.state, home=fleet.home)


async def test_children_with_request_ids_run_once_each_on_one_of_two_workers(
    fleet: Fleet,
) -> None:
    first, second = fleet.start_worker(), fleet.start_worker()
    fleet.wait_ready()
    async with _host(fleet) as host:
        started = [await host.start(_request(i)) for i in range(6)]
        with anyio.fail_after(60):
            results = [await host.wait(info.run_id) for info in started]
        again = [await host.start(_request(i)) for i in range(6)]
    assert [r.status for r in results] == ["completed"] * 6
    assert {r.text for r in results} == {"read the notes"}
    # A repeated request id is answered from the record: the same run, no second child.
    assert [a.run_id for a in again] == [s.run_id for s in started]
    store = fleet.store()
    runs = {s.run_id for s in started}
    headers = store.page_sessions(limit=100)
    assert {h.session_id for h in headers} == runs
    # Each run was driven by exactly one worker, and both workers took some.
    assert first.drove() | second.drove() == runs
    assert not first.drove() & second.drove()
    assert first.drove() and second.drove()
    for run_id in runs:
        kinds = [e.kind for e in store.events(session_id=run_id)]
        assert kinds.count("completed") == 1
        assert stored_lease(store, run_id) is None
        transcript = store.transcript(run_id)
        assert [m["role"] for m in transcript] == ["user", "assistant", "tool", "assistant"]


def _driving(fleet: Fleet, count: int, timeout: float = 60.0) -> dict[str, str]:
    """Wait until ``count`` runs are held by live leases; run id -> lease owner."""
    deadline = time.monotonic() + timeout
    while True:
        store = fleet.store()
        held = {}
        for header in store.page_sessions(limit=100):
            lease = stored_lease(store, header.session_id)
            if lease is not None and header.status == "running":
                held[header.session_id] = lease.owner
        store.close()
        if len(held) >= count:
            return held
        assert time.monotonic() < deadline, f"only {len(held)} runs are being driven"
        time.sleep(0.05)


async def test_a_worker_killed_mid_run_loses_nothing_its_run_ends_on_another(
    tmp_path: Path,
) -> None:
    fleet = Fleet(tmp_path, write_project(tmp_path, turns=SLOW_TURNS))
    try:
        workers = [fleet.start_worker(concurrency=1), fleet.start_worker(concurrency=1)]
        fleet.wait_ready()
        async with _host(fleet) as host:
            started = [await host.start(_request(i)) for i in range(2)]
            held = await anyio.to_thread.run_sync(_driving, fleet, 2)
            victim = next(w for w in workers if w.owner in held.values())
            survivor = next(w for w in workers if w is not victim)
            lost = next(run for run, owner in held.items() if owner == victim.owner)
            before = await anyio.to_thread.run_sync(_doctor, fleet)
            victim.signal(signal.SIGKILL)
            victim.process.wait(timeout=30)
            with anyio.fail_after(90):
                results = {info.run_id: await host.wait(info.run_id) for info in started}
        assert {r.status for r in results.values()} == {"completed"}
        assert lost in survivor.drove()
        # `membrane doctor` saw both workers running a child each, alive, and no problem.
        assert before["queue"]["reachable"] is True and before["queue"]["running"] == 2
        assert {(w["worker"], w["runs"], w["state"]) for w in before["queue"]["workers"]} == {
            (victim.owner, 1, "alive"),
            (survivor.owner, 1, "alive"),
        }
        assert not [p for p in before["problems"] if "queue" in p["problem"]]
        store = fleet.store()
        events = store.events(session_id=lost)
        kinds = [e.kind for e in events]
        handed = [e for e in events if e.kind == "handed_off"]
        assert len(handed) == 1 and handed[0].data["owner"] == victim.owner
        assert kinds.count("completed") == 1 and "interrupted" not in kinds
        header = store.get_header(lost)
        assert header is not None and header.status in END_STATES
        # The survivor went on from the stored conversation: one task, one answer at the end.
        transcript = store.transcript(lost)
        assert transcript[0]["role"] == "user"
        assert sum(1 for m in transcript if m["role"] == "user") == 1
        assert transcript[-1]["content"] == "read the notes"
    finally:
        fleet.stop()


async def test_a_stalled_workers_run_moves_and_its_late_writes_are_refused(
    tmp_path: Path,
) -> None:
    fleet = Fleet(tmp_path, write_project(tmp_path, turns=SLOW_TURNS))
    try:
        workers = [fleet.start_worker(concurrency=1), fleet.start_worker(concurrency=1)]
        fleet.wait_ready()
        async with _host(fleet) as host:
            info = await host.start(_request(0))
            held = await anyio.to_thread.run_sync(_driving, fleet, 1)
            stalled = next(w for w in workers if w.owner == held[info.run_id])
            other = next(w for w in workers if w is not stalled)
            # Past its lease (2 s): the other worker's sweeper hands the run back to the
            # queue and the other worker takes it, while the stalled process still drives it.
            stalled.signal(signal.SIGSTOP)
            await anyio.to_thread.run_sync(_taken_by, fleet, info.run_id, other.owner)
            stalled.signal(signal.SIGCONT)
            with anyio.fail_after(90):
                result = await host.wait(info.run_id)
                ended = await anyio.to_thread.run_sync(_ended_notice, stalled, info.run_id)
        assert result.status == "completed"
        # The stalled worker went on, lost the run at its next renewal and ended it in its own
        # memory only: its transcript writes and its end were refused by the lease's fence.
        assert ended["event"] == "lost" or ended["status"] == "stopped"
        store = fleet.store()
        kinds = [e.kind for e in store.events(session_id=info.run_id)]
        assert kinds.count("completed") == 1
        assert "stopped" not in kinds and "error" not in kinds
        header = store.get_header(info.run_id)
        assert header is not None and header.status == "completed"
        transcript = store.transcript(info.run_id)
        assert sum(1 for m in transcript if m["role"] == "user") == 1
        assert transcript[-1]["content"] == "read the notes"
    finally:
        fleet.stop()


def _taken_by(fleet: Fleet, run_id: str, owner: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        store = fleet.store()
        lease = stored_lease(store, run_id)
        store.close()
        if lease is not None and lease.owner == owner:
            return
        assert time.monotonic() < deadline, f"run {run_id} never moved to {owner}"
        time.sleep(0.05)


def _ended_notice(worker: WorkerProcess, run_id: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        for event in worker.events():
            if event["event"] in ("ended", "lost") and event["run_id"] == run_id:
                return event
        assert time.monotonic() < deadline, f"the stalled worker never ended {run_id}"
        time.sleep(0.05)


def _doctor(fleet: Fleet) -> dict[str, Any]:
    """``membrane doctor --json`` of the fleet's project (its settings name the queue)."""
    argv = [sys.executable, "-m", "membrane", "doctor", "--json", "--project", str(fleet.project)]
    argv += ["--state", str(fleet.state)]
    env = {**os.environ, "MEMBRANE_HOME": str(fleet.home), "MEMBRANE_STATE_URL": ""}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    report: dict[str, Any] = json.loads(done.stdout)
    return report
