"""Runs a lead whose background worker is killed mid-run with the whole process (kill -9).

Usage: background_crash.py STATE_DB PROJECT HOME POINT

The lead starts ``worker`` in the background with ``Task``, then waits forever in ``Read``.
The worker calls ``Read`` once and then waits forever for its model. Once the worker reaches
POINT (``published``: its start is committed; ``tool_call``: it asked for ``Read``;
``tool_result``: its ``Read`` answered and was stored) the script prints
``{"lead": RUN_ID, "worker": RUN_ID}`` and blocks until it is killed.
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


async def read(arguments: Mapping[str, Any], context: ToolContext) -> str:
    if context.agent == "worker":
        return "three files"
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def answer(request: ModelRequest) -> ModelResponse:
    replies = sum(1 for message in request.messages if message.role == "assistant")
    if request.agent == "worker":
        if replies == 0:
            return ModelResponse(
                tool_calls=(ToolCall("w-1", "Read", {}),), stop_reason="tool_calls"
            )
        await anyio.sleep_forever()
    if replies == 0:
        start = ToolCall(
            "lead-1", "Task", {"agent": "worker", "task": "survey", "background": True}
        )
        return ModelResponse(tool_calls=(start,), stop_reason="tool_calls")
    return ModelResponse(tool_calls=(ToolCall("lead-2", "Read", {}),), stop_reason="tool_calls")


async def main(db: str, project: str, home: str, point: str) -> None:
    root = Path(project)
    registry = ToolRegistry()
    registry.register(
        Tool(name="Read", description="Read.", input_schema={"type": "object"}, handler=read)
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
            if event.agent == "worker" and event.kind == point:
                print(json.dumps({"lead": lead.run_id, "worker": event.run_id}), flush=True)
                await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
