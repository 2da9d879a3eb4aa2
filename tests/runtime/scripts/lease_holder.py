"""Resumes one stored run and drives it until killed, or reports that another process does.

Usage: lease_holder.py STATE_DB PROJECT HOME RUN_ID

Prints one JSON line: ``{"outcome": "drives", "owner": OWNER}`` once ``resume()`` returned
(this process holds the run's lease; its model then blocks until the process is killed), or
``{"outcome": "run-leased", "owner": OWNER}`` naming the process that holds it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

from membrane.agents.catalog import Catalog
from membrane.config.values import Settings
from membrane.errors import RunLeased
from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import InProcessProvider, RuntimeOptions, SubagentRuntime
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel
from membrane.tools.registry import ToolRegistry


async def block(request: ModelRequest) -> ModelResponse:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def main(db: str, project: str, home: str, run_id: str) -> None:
    root = Path(project)
    settings = Settings()
    runtime = SubagentRuntime(
        catalog=Catalog(project=root, home=Path(home), settings=settings),
        registry=ToolRegistry(),
        provider=InProcessProvider(FunctionModel(block)),
        store=SQLiteStore(db),
        options=RuntimeOptions(settings=settings, project=root),
    )
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
