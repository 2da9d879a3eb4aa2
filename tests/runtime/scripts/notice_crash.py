"""Runs a lead whose background worker ends while the lead is busy, then blocks until killed.

Usage: notice_crash.py STATE_DB PROJECT HOME

The lead starts ``worker`` in the background with ``Task`` (turn 1), then calls ``Read``
(turn 2), which never returns. The worker answers once ``Read`` has started, so its end, and
the completion notice it owes the lead, are committed while the notice can only wait for the
lead's next turn boundary. Once the worker's end is committed the script prints
``{"lead": RUN_ID, "worker": RUN_ID}``, and the process is killed with the notice undelivered.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from membrane.agents.catalog import Catalog
from membrane.config.values import Settings
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import (
    InProcessProvider,
    RuntimeOptions,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel
from membrane.tools.registry import ToolRegistry
from membrane.tools.spec import Tool, ToolContext

HOLDING = anyio.Event()


async def hold(arguments: Mapping[str, Any], context: ToolContext) -> str:
    HOLDING.set()
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def answer(request: ModelRequest) -> ModelResponse:
    if request.agent == "worker":
        await HOLDING.wait()
        return ModelResponse(text="the survey found 3 files")
    replies = sum(1 for message in request.messages if message.role == "assistant")
    if replies == 0:
        start = ToolCall(
            "lead-1", "Task", {"agent": "worker", "task": "survey", "background": True}
        )
        return ModelResponse(tool_calls=(start,), stop_reason="tool_calls")
    return ModelResponse(tool_calls=(ToolCall("lead-2", "Read", {}),), stop_reason="tool_calls")


async def main(db: str, project: str, home: str) -> None:
    root = Path(project)
    registry = ToolRegistry()
    registry.register(
        Tool(name="Read", description="Read.", input_schema={"type": "object"}, handler=hold)
    )
    settings = Settings(max_depth=1)
    runtime = SubagentRuntime(
        catalog=Catalog(project=root, home=Path(home), settings=settings),
        registry=registry,
        provider=InProcessProvider(FunctionModel(answer)),
        store=SQLiteStore(db),
        options=RuntimeOptions(settings=settings, project=root),
    )
    async with runtime, runtime.events() as stream:
        lead = await runtime.start(SubagentStartRequest("lead", "delegate the survey"))
        async for event in stream:
            if event.agent == "worker" and event.kind == "completed":
                print(json.dumps({"lead": lead.run_id, "worker": event.run_id}), flush=True)
                await anyio.sleep_forever()


if __name__ == "__main__":
    db, project, home = sys.argv[1:4]
    anyio.run(main, db, project, home)
