"""Starts a chain of children on a SQLite store, reports their ids, then runs until killed.

Usage: depth_chain.py STATE_DB PROJECT HOME LENGTH CAP

Each child's model never answers, so the whole chain stays running until the process dies.
"""

from __future__ import annotations

import json
import sys

import anyio
from script_runtime import script_runtime

from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import (
    SubagentStartRequest,
)


async def never(request: ModelRequest) -> ModelResponse:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def main(db: str, project: str, home: str, length: int, cap: int) -> None:
    runtime = script_runtime(db, project, home, never)
    async with runtime:
        ids: list[str] = []
        for _ in range(length):
            parent = ids[-1] if ids else None
            request = SubagentStartRequest("waiter", "wait", parent_id=parent, max_depth=cap)
            ids.append((await runtime.start(request)).run_id)
        print(json.dumps(ids), flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    db, project, home, length, cap = sys.argv[1:6]
    anyio.run(main, db, project, home, int(length), int(cap))
