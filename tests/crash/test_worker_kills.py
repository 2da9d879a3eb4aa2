"""The kill series of a fleet (``make test-crash``): three ``membrane worker`` processes drain
``MEMBRANE_CRASH_CHILDREN`` children (300) that a host put on the queue with request ids, while
one worker at a time is killed with SIGKILL at random moments and started again,
``MEMBRANE_CRASH_WORKER_KILLS`` times (100). Afterwards: one run per request id, each ended
``completed`` exactly once with its whole conversation, none left queued or running, no lease
held, and every child driven to its end by some worker. ``MEMBRANE_CRASH_SEED`` fixes the draw.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import anyio
import pytest

from membrane import SubagentRuntime, SubagentStartRequest
from membrane.testing import stored_lease
from runtime.fleet import Fleet, WorkerProcess, write_project

pytestmark = [pytest.mark.crash, pytest.mark.anyio]

SEED = int(os.environ.get("MEMBRANE_CRASH_SEED", "0")) or random.SystemRandom().randrange(1, 2**31)
CHILDREN = int(os.environ.get("MEMBRANE_CRASH_CHILDREN", "300"))
KILLS = int(os.environ.get("MEMBRANE_CRASH_WORKER_KILLS", "100"))
TURNS = [
    {"tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}], "delay": 0.5},
    {"text": "read the notes", "delay": 0.5},
]


def _unfinished(fleet: Fleet) -> int:
    store = fleet.store()
    try:
        return sum(1 for h in store.page_sessions(limit=CHILDREN + 1) if h.status != "completed")
    finally:
        store.close()


def _kill_series(fleet: Fleet, draw: random.Random) -> int:
    """Kill a random worker every 0.1-0.6 s and start another at once, ``KILLS`` times or
    until every child ended; the kills made."""
    kills = 0
    while kills < KILLS and _unfinished(fleet) > 0:
        time.sleep(draw.uniform(0.1, 0.6))
        live = [w for w in fleet.workers if w.process.poll() is None]
        victim: WorkerProcess = draw.choice(live)
        victim.signal(signal.SIGKILL)
        victim.process.wait(timeout=30)
        kills += 1
        fleet.start_worker(concurrency=10)
    return kills


async def test_killing_workers_at_random_leaves_one_completed_run_per_request_id(
    tmp_path: Path,
) -> None:
    draw = random.Random(SEED)
    fleet = Fleet(tmp_path, write_project(tmp_path, turns=TURNS))
    try:
        async with SubagentRuntime.open(fleet.project, state=fleet.state, home=fleet.home) as host:
            started = [
                await host.start(
                    SubagentStartRequest(
                        "helper", f"child {i}", background=True, request_id=f"job-{i}"
                    )
                )
                for i in range(CHILDREN)
            ]
            for _ in range(3):
                fleet.start_worker(concurrency=10)
            kills = await anyio.to_thread.run_sync(_kill_series, fleet, draw)
            with anyio.fail_after(600):
                while await anyio.to_thread.run_sync(_unfinished, fleet):
                    await anyio.sleep(0.2)
            again = [
                await host.start(
                    SubagentStartRequest(
                        "helper", f"child {i}", background=True, request_id=f"job-{i}"
                    )
                )
                for i in range(CHILDREN)
            ]
        store = fleet.store()
        runs = {info.run_id for info in started}
        assert [a.run_id for a in again] == [s.run_id for s in started], f"seed {SEED}"
        headers = store.page_sessions(limit=CHILDREN + 1)
        assert {h.session_id for h in headers} == runs, f"seed {SEED}"
        handed = 0
        for run_id in runs:
            kinds = [e.kind for e in store.events(session_id=run_id)]
            assert kinds.count("completed") == 1, (run_id, kinds, SEED)
            assert "stopped" not in kinds and "error" not in kinds, (run_id, kinds, SEED)
            handed += kinds.count("handed_off")
            assert stored_lease(store, run_id) is None, (run_id, SEED)
            transcript = store.transcript(run_id)
            assert transcript[0]["role"] == "user", (run_id, SEED)
            assert sum(1 for m in transcript if m["role"] == "user") == 1, (run_id, SEED)
            assert transcript[-1]["content"] == "read the notes", (run_id, SEED)
        drove = set().union(*(w.drove() for w in fleet.workers))
        assert runs <= drove, f"seed {SEED}"
        print(
            f"\nworker kill series (seed {SEED}): {CHILDREN} children, {kills} workers killed "
            f"with SIGKILL and restarted, {handed} hand-offs; every request id one run, "
            "completed once, none left queued or running, no lease held"
        )
    finally:
        fleet.stop()
