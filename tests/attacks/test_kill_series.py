"""kill -9 at every write point of a delegation, then recovery in a fresh process.

``kill_series.py`` runs one delegation (a lead that starts a background worker and waits for
it; the worker forges calls to a hidden tool) and then the same delegation once per committed
transaction, each time killing the process with SIGKILL just before that transaction commits.
The kill points come from each run, not from one count taken first, so a loaded machine that
interleaves the lead and the worker otherwise still has every write point hit. Each killed
state is then recovered here as an operator would: a new runtime on the same state file sweeps
it (expired leases, stale receipts), resumes what was left unfinished, and starts the lead
again under its request id if no lead was published. Afterwards, whatever the kill point: the
hidden tool never ran, exactly one lead and one worker exist, both completed, the worker
completed once, and the worker's answer reached the lead exactly once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from membrane.runtime import SubagentStartRequest
from membrane.store import SQLiteStore
from membrane.store.base import SessionHeader

from . import kill_series

pytestmark = pytest.mark.anyio

SCRIPT = Path(kill_series.__file__)
UNFINISHED = frozenset({"queued", "running", "interrupted"})


def after_leases_expire() -> float:
    """A store clock past the lease time: every lease the killed process held has expired."""
    return time.time() + 2 * kill_series.SETTINGS.lease_seconds


def _series(base: Path) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(base)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    cases: list[dict[str, object]] = json.loads(done.stdout)
    return cases


async def _recover(folder: Path) -> str:
    """Bring the delegation in ``folder`` to its end; the lead's final text."""
    db, project, home, marker = kill_series.case(folder)
    store = SQLiteStore(db, clock=after_leases_expire)
    try:
        async with kill_series.runtime(project, home, store, marker) as live:
            live.sweeper.sweep(now=after_leases_expire())
            sessions = store.list_sessions()
            for header in [h for h in sessions if h.agent == "worker"]:
                if header.status in UNFINISHED:
                    await live.resume(header.session_id, "go on")
                    await live.wait(header.session_id)
            leads = [h for h in sessions if h.agent == "lead"]
            if not leads:
                request = SubagentStartRequest(
                    "lead", "delegate the survey", request_id=kill_series.LEAD_REQUEST
                )
                return (await live.run(request)).text
            [lead] = leads
            if lead.status in UNFINISHED:
                await live.resume(lead.session_id, "go on")
                return (await live.wait(lead.session_id)).text
            return str((lead.result or {}).get("text", ""))
    finally:
        store.close()


def _one(sessions: list[SessionHeader], agent: str) -> SessionHeader:
    found = [h for h in sessions if h.agent == agent]
    assert len(found) == 1, [(h.agent, h.session_id, h.status) for h in sessions]
    return found[0]


async def test_a_delegation_killed_at_any_write_point_recovers_with_nothing_lost_or_doubled(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(600):
        cases = await anyio.to_thread.run_sync(lambda: _series(tmp_path))
    assert len(cases) > 8  # the delegation commits at least this many transactions
    # Killed at every write point in turn, until a run committed fewer times and ended.
    assert [c["signal"] for c in cases] == [0] + [9] * (len(cases) - 2) + [0]
    for case in cases:
        folder = Path(str(case["folder"]))
        with anyio.fail_after(60):
            final = await _recover(folder)
        where = f"killed before commit {case['k']}"
        assert final == "done: " + kill_series.ANSWER, where
        assert not (folder / "marker").exists(), where
        store = SQLiteStore(folder / "state.db")
        try:
            sessions = store.list_sessions()
            lead, worker = _one(sessions, "lead"), _one(sessions, "worker")
            assert (lead.status, worker.status) == ("completed", "completed"), where
            assert worker.parent_id == lead.session_id, where
            assert [e.child_id for e in store.edges(parent_id=lead.session_id)] == [
                worker.session_id
            ], where
            kinds = [e.kind for e in store.events(session_id=worker.session_id)]
            assert kinds.count("completed") == 1, (where, kinds)
            heard = [
                m for m in store.transcript(lead.session_id) if kill_series.ANSWER in json.dumps(m)
            ]
            assert len(heard) == 2, (where, heard)  # the worker's answer, and the lead's own
        finally:
            store.close()
