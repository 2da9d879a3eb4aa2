"""Receipts and leases name the process that holds them (host, pid, boot and start time), so a
successor tells a dead owner from a live one: a start or message retried after its owner was
killed acts at once, and a live owner's pending receipt is never reaped, however old, while
that process runs; a run whose driver was killed is reconciled by the next sweep and resumed at
once, without waiting for its lease to expire. Real processes on a real SQLite file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from membrane.durable.sweeper import Sweeper
from membrane.errors import RequestPending
from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import InProcessProvider, SubagentStartRequest
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel, stored_receipt

from .conftest import Project

pytestmark = pytest.mark.anyio

# A process in the middle of a start: its pending receipt is written, and it waits.
HOLDER = textwrap.dedent(
    """
    import sys
    from membrane.durable.owners import new_owner
    from membrane.store import SQLiteStore

    store = SQLiteStore(sys.argv[1])
    for request_id, kind in (("spawn-1", "spawn"), ("message-1", "message")):
        assert store.begin_receipt(request_id, kind=kind, owner=new_owner()) is None
    store.close()
    print("holding", flush=True)
    sys.stdin.read()
    """
)


def _much_later() -> float:
    """Past the receipt TTL (15 minutes) by a day."""
    return time.time() + 86_400


async def _answer(request: ModelRequest) -> ModelResponse:
    return ModelResponse(text=f"{request.agent} done")


async def test_a_dead_owners_receipt_is_cleared_at_once_and_a_live_owners_never(
    project: Project, tmp_path: Path
) -> None:
    project.agent("lead")
    project.agent("worker")
    db = tmp_path / "state.db"
    store = SQLiteStore(db)
    async with project.runtime(InProcessProvider(FunctionModel(_answer)), store=store) as rt:
        lead = (await rt.run(SubagentStartRequest("lead", "lead the work"))).run_id
    store.close()

    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        request = SubagentStartRequest(
            "worker", "do the job", parent_id=lead, request_id="spawn-1", background=True
        )
        store = SQLiteStore(db, clock=_much_later)
        async with project.runtime(InProcessProvider(FunctionModel(_answer)), store=store) as rt:
            # The owner runs: its start is in progress, and no sweep reaps it, a day later.
            with pytest.raises(RequestPending) as pending:
                await rt.start(request)
            assert str(holder.pid) in str(pending.value)
            with pytest.raises(RequestPending):
                rt.message(lead, "check the tests", request_id="message-1")
            assert Sweeper(store, clock=_much_later).sweep().reaped == ()
            receipts = [stored_receipt(store, rid) for rid in ("spawn-1", "message-1")]
            assert {r.status for r in receipts if r} == {"pending"}

            # Killed, it is dead: the retry acts now, in the same runtime, with no sweep and
            # no TTL.
            os.kill(holder.pid, signal.SIGKILL)
            with anyio.fail_after(60):
                await anyio.to_thread.run_sync(holder.wait)
                info = await rt.start(request)
                await rt.wait(info.run_id)
            delivery = rt.message(lead, "check the tests", request_id="message-1")
            assert not delivery.replayed
        children = store.list_sessions(parent_id=lead)
        assert [child.request_id for child in children] == ["spawn-1"]
        for request_id in ("spawn-1", "message-1"):
            receipt = stored_receipt(store, request_id)
            assert receipt is not None and receipt.status == "completed"
        store.close()
    finally:
        holder.kill()
        holder.wait()


LEASE_HOLDER = Path(__file__).parent / "scripts" / "lease_holder.py"


async def test_a_killed_drivers_run_is_reconciled_and_resumed_at_once_and_a_live_ones_never(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker")
    db = tmp_path / "state.db"
    store = SQLiteStore(db)
    async with project.runtime(InProcessProvider(FunctionModel(_answer)), store=store) as rt:
        run_id = (await rt.run(SubagentStartRequest("worker", "first"))).run_id
    store.close()
    env = {**os.environ, "MEMBRANE_HOME": str(project.home)}
    args = [str(db), str(project.root), str(project.home), run_id]
    driver = subprocess.Popen(
        [sys.executable, str(LEASE_HOLDER), *args], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert driver.stdout is not None
        with anyio.fail_after(60):
            line = await anyio.to_thread.run_sync(driver.stdout.readline)
        assert json.loads(line)["outcome"] == "drives"
        store = SQLiteStore(db)
        # Its lease runs (30 s) and its driver lives: a sweep leaves the run to it.
        assert Sweeper(store).sweep().interrupted == ()
        os.kill(driver.pid, signal.SIGKILL)
        with anyio.fail_after(60):
            await anyio.to_thread.run_sync(driver.wait)
        # Killed: the lease has not run out, but its owner is dead, so the next sweep
        # reconciles the run now, and a runtime resumes it at once.
        assert Sweeper(store).sweep().interrupted == (run_id,)
        header = store.get_header(run_id)
        assert header is not None and header.status == "interrupted"
        async with project.runtime(InProcessProvider(FunctionModel(_answer)), store=store) as rt:
            with anyio.fail_after(60):
                await rt.resume(run_id, "once more")
                assert (await rt.wait(run_id)).status == "completed"
        store.close()
    finally:
        driver.kill()
        driver.wait()
