"""Runs lead (depth 0) -> worker (depth 1) on a SQLite store, then blocks until killed.

Usage: resume_chain.py STATE_DB PROJECT HOME

The lead delegates to the worker with ``Task``. The worker reads a file on its first turn; on
its second it prints ``{"worker": RUN_ID}`` and never answers, so the process is killed with
the worker mid-run and its first turn stored.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

import anyio
from script_runtime import script_runtime

from membrane.config.values import Settings
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import (
    SubagentStartRequest,
)
from membrane.tools.spec import ToolContext


async def read(arguments: Mapping[str, Any], context: ToolContext) -> str:
    return f"contents of {arguments.get('path')}"


async def answer(request: ModelRequest) -> ModelResponse:
    replies = sum(1 for message in request.messages if message.role == "assistant")
    if request.agent == "lead" and replies == 0:
        call = ToolCall("lead-1", "Task", {"agent": "worker", "task": "look around"})
        return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
    if request.agent == "worker" and replies == 0:
        call = ToolCall("worker-1", "Read", {"path": "notes.txt"})
        return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
    if request.agent == "worker":
        print(json.dumps({"worker": request.run_id}), flush=True)
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def main(db: str, project: str, home: str) -> None:
    runtime = script_runtime(db, project, home, answer, read=read, settings=Settings(max_depth=1))
    async with runtime:
        await runtime.start(SubagentStartRequest("lead", "delegate the survey"))
        await anyio.sleep_forever()


if __name__ == "__main__":
    db, project, home = sys.argv[1:4]
    anyio.run(main, db, project, home)
