"""Drives one durable scenario on a real SQLite file; run again after a ``kill -9``, it finishes
what the killed process left, without doing anything twice.

Usage: crash_driver.py SCENARIO STATE_DB PROJECT HOME RUN_ID

* ``start``: starts ``worker`` in the background under the stored run RUN_ID with the request
  id ``spawn-1`` (a repeat replays it), resumes the worker if a crash left it interrupted, waits
  for it, then resumes RUN_ID so that it takes the worker's completion delivery.
* ``message``: sends RUN_ID the message ``check the tests`` with the request id ``message-1``
  (a repeat replays it), then resumes RUN_ID so that it takes the delivery.

``MEMBRANE_CRASH_AT`` (see ``membrane.durable.crashpoints``) kills the process at that point.
Prints one JSON line: ``{"outcome": "done", ...}``, or ``{"outcome": CODE}`` when the store says
to wait (``request-pending``, ``run-leased``).
"""

from __future__ import annotations

import json
import sys

import anyio
from script_runtime import script_runtime

from membrane.errors import ChildFailed, RequestPending, RunLeased
from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import (
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.store import SQLiteStore

RESUMABLE = ("interrupted", "completed", "failed", "stopped")


async def answer(request: ModelRequest) -> ModelResponse:
    return ModelResponse(text=f"{request.agent} done")


async def take_deliveries(runtime: SubagentRuntime, store: SQLiteStore, run_id: str) -> None:
    """Resume ``run_id`` when a delivery waits for it, or a killed process left it running."""
    header = store.get_header(run_id)
    assert header is not None
    if store.pending_outbox(recipient=run_id) or header.status not in RESUMABLE[1:]:
        await runtime.resume(run_id, "any news?")
        await runtime.wait(run_id)


async def start(runtime: SubagentRuntime, store: SQLiteStore, parent: str) -> dict[str, object]:
    request = SubagentStartRequest(
        "worker", "do the job", parent_id=parent, request_id="spawn-1", background=True
    )
    try:
        info = await runtime.start(request)
        worker = info.run_id
    except ChildFailed as exc:  # replayed: the run exists, a crash interrupted it
        worker = str(exc.data["run_id"])
    live = {info.run_id for info in runtime.runs()}
    header = store.get_header(worker)
    assert header is not None
    if worker not in live and header.status not in RESUMABLE[1:]:
        # Left running (or interrupted) by a killed process: drive it here; a lease the killed
        # process still holds is run-leased until it expires.
        await runtime.resume(worker, "go on")
        live.add(worker)
    if worker in live:
        await runtime.wait(worker)
    await take_deliveries(runtime, store, parent)
    return {"worker": worker}


async def message(runtime: SubagentRuntime, store: SQLiteStore, run_id: str) -> dict[str, object]:
    delivery = runtime.message(run_id, "check the tests", request_id="message-1")
    await take_deliveries(runtime, store, run_id)
    return {"delivery": delivery.id, "replayed": delivery.replayed}


def runtime_on(store: SQLiteStore, project: str, home: str) -> SubagentRuntime:
    """A runtime on ``store`` for the project folder ``project``, children answering at once."""
    return script_runtime(store, project, home, answer)


async def main(scenario: str, db: str, project: str, home: str, run_id: str) -> None:
    store = SQLiteStore(db)
    runtime = runtime_on(store, project, home)
    async with runtime:
        try:
            with anyio.fail_after(60):
                found = await (start if scenario == "start" else message)(runtime, store, run_id)
        except (RequestPending, RunLeased) as exc:
            print(json.dumps({"outcome": exc.code}), flush=True)
            return
    print(json.dumps({"outcome": "done", **found}), flush=True)


if __name__ == "__main__":
    scenario, db, project, home, run_id = sys.argv[1:6]
    anyio.run(main, scenario, db, project, home, run_id)
