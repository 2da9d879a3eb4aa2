"""Resumes one stored run and drives it until killed, or reports that another process does.

Usage: lease_holder.py STATE_DB PROJECT HOME RUN_ID

Prints one JSON line: ``{"outcome": "drives", "owner": OWNER}`` once ``resume()`` returned
(this process holds the run's lease; its model then blocks until the process is killed), or
``{"outcome": "run-leased", "owner": OWNER}`` naming the process that holds it.
"""

from __future__ import annotations

import json
import sys

import anyio
from script_runtime import script_runtime

from membrane.errors import RunLeased
from membrane.models.base import ModelRequest, ModelResponse


async def block(request: ModelRequest) -> ModelResponse:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def main(db: str, project: str, home: str, run_id: str) -> None:
    runtime = script_runtime(db, project, home, block)
    async with runtime:
        try:
            await runtime.resume(run_id, "go on")
        except RunLeased as exc:
            print(json.dumps({"outcome": "run-leased", "owner": exc.data["owner"]}), flush=True)
            return
        print(json.dumps({"outcome": "drives", "owner": runtime.sweeper.owner}), flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
