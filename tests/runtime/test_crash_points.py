"""``kill -9`` at every write point of a start, a message and a delivery (seed 002, DESIGN rule
8), with real processes on a real SQLite file: after a restart (and, where the killed process
left a live lease, once the lease has run out) there is exactly one child per request id, the
message is applied once, and each delivery is in the recipient's stored conversation exactly
once; no receipt is left pending. A pending receipt names the process that wrote it, so the
restart clears a killed process's receipt at once instead of waiting out the receipt TTL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane.durable.crashpoints import CRASH_ENV, POINTS
from membrane.durable.sweeper import Sweeper
from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import InProcessProvider, SubagentStartRequest
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel, stored_receipt

from .conftest import Project

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).parent / "scripts" / "crash_driver.py"
START_POINTS = [p for p in POINTS if not p.startswith("message.")]
MESSAGE_POINTS = [p for p in POINTS if p.startswith(("message.", "delivery."))]


def _later() -> float:
    """A clock past the receipt TTL (15 minutes) and every lease a killed process left."""
    return time.time() + 3600


async def _stored_lead(project: Project, db: Path) -> str:
    project.agent("lead")
    project.agent("worker")

    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="lead done")

    store = SQLiteStore(db)
    async with project.runtime(InProcessProvider(FunctionModel(answer)), store=store) as rt:
        result = await rt.run(SubagentStartRequest("lead", "lead the work"))
    store.close()
    return result.run_id


def _drive(scenario: str, db: Path, project: Project, run_id: str, crash: str | None) -> Any:
    env = {**os.environ, "MEMBRANE_HOME": str(project.home)}
    env.pop(CRASH_ENV, None)
    if crash is not None:
        env[CRASH_ENV] = crash
    args = [sys.executable, str(SCRIPT), scenario, str(db), str(project.root), str(project.home)]
    done = subprocess.run(
        [*args, run_id], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    if crash is not None:
        assert done.returncode == -9, (crash, done.returncode, done.stdout, done.stderr[-3000:])
        return None
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


#: The points that leave a receipt pending: the restart clears it at once (its owner is dead).
PENDING = ("spawn.pending", "spawn.publish", "message.pending", "message.write")


def _recover(scenario: str, db: Path, project: Project, run_id: str, crash: str) -> list[str]:
    """Kill the driver at ``crash``; restart it at once where a receipt was left pending, then
    once the leases have run out (a sweep with a later clock), as often as it asks to wait;
    the outcomes in order."""
    _drive(scenario, db, project, run_id, crash)
    outcomes = (
        [_drive(scenario, db, project, run_id, None)["outcome"]] if crash in PENDING else [""]
    )
    while outcomes[-1] != "done":  # "": a restart after the TTL and the leases
        assert len(outcomes) < 4, outcomes
        store = SQLiteStore(db, clock=_later)
        Sweeper(store, clock=_later).sweep()
        store.close()
        outcomes.append(_drive(scenario, db, project, run_id, None)["outcome"])
    return outcomes


def _notices(store: SQLiteStore, run_id: str, tag: str) -> list[str]:
    texts = [str(m.get("content")) for m in store.transcript(run_id)]
    return [t for t in texts if t.startswith(f"<{tag} ") and "delivery=" in t]


def _no_pending_receipts(store: SQLiteStore) -> None:
    assert store.reap_pending_receipts(older_than=_later()) == []


async def _crashed(
    scenario: str, crash: str, project: Project, tmp_path: Path
) -> tuple[SQLiteStore, str]:
    """A stored lead, the scenario killed at ``crash`` and recovered; the store and the lead."""
    db = tmp_path / "state.db"
    lead = await _stored_lead(project, db)
    with anyio.fail_after(300):
        outcomes = await anyio.to_thread.run_sync(_recover, scenario, db, project, lead, crash)
    if crash in PENDING:
        # The receipt was left pending by a process that is dead: the retry acts at once,
        # without waiting for the receipt TTL (15 minutes).
        assert outcomes == ["done"]
    return SQLiteStore(db), lead


@pytest.mark.parametrize("crash", START_POINTS)
async def test_a_start_killed_at_each_write_point_yields_one_child_and_one_notice(
    crash: str, project: Project, tmp_path: Path
) -> None:
    store, lead = await _crashed("start", crash, project, tmp_path)
    children = store.list_sessions(parent_id=lead)
    assert [c.request_id for c in children] == ["spawn-1"]  # exactly one child
    (child,) = children
    assert child.status == "completed"
    completions = _notices(store, lead, "task_notification")
    assert len(completions) == 1 and child.session_id in completions[0]
    assert store.pending_outbox() == [] and store.dead_outbox() == []
    (edge,) = store.edges(parent_id=lead)
    assert edge.status == "completed"
    receipt = stored_receipt(store, "spawn-1")
    assert receipt is not None and receipt.status == "completed"
    _no_pending_receipts(store)
    store.close()


@pytest.mark.parametrize("crash", MESSAGE_POINTS)
async def test_a_message_killed_at_each_write_point_is_applied_once(
    crash: str, project: Project, tmp_path: Path
) -> None:
    store, lead = await _crashed("message", crash, project, tmp_path)
    messages = _notices(store, lead, "agent_message")
    assert len(messages) == 1 and "check the tests" in messages[0]  # applied once
    receipt = stored_receipt(store, "message-1")
    assert receipt is not None and receipt.status == "completed"
    stored: Any = receipt.result or {}
    assert f'delivery="{stored["delivery"]["id"]}"' in messages[0]
    assert store.pending_outbox() == [] and store.dead_outbox() == []
    assert store.list_sessions(parent_id=lead) == []
    _no_pending_receipts(store)
    store.close()


@pytest.mark.parametrize("crash", ["spawn.pending", "spawn.publish", "spawn.published"])
async def test_a_start_killed_mid_start_charges_the_children_budget_once(
    crash: str, project: Project, tmp_path: Path
) -> None:
    db = tmp_path / "state.db"
    project.agent("lead")
    project.agent("worker")

    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="lead done")

    store = SQLiteStore(db)
    async with project.runtime(InProcessProvider(FunctionModel(answer)), store=store) as rt:
        lead = (await rt.run(SubagentStartRequest("lead", "lead", budget={"children": 5}))).run_id
    store.close()
    with anyio.fail_after(300):
        await anyio.to_thread.run_sync(_recover, "start", db, project, lead, crash)
    with SQLiteStore(db) as store:
        children = store.list_sessions(parent_id=lead)
        header = store.get_header(lead)
    assert len(children) == 1
    assert header is not None
    # One child, one charge: the killed attempt's charge is not counted again by the retry.
    assert header.meta["budget"]["used"]["children"] == 1
