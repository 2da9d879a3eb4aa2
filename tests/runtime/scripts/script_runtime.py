"""What the runtime scripts share: a runtime on a real SQLite file, and a lead that starts a
background worker and then waits in ``Read``.

The scripts run as their own processes (the tests kill them), so each builds its runtime here
from the arguments it was given: the store, the project and home folders, the model's answer
function and, where the script needs one, the ``Read`` tool's handler.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
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

__all__ = ["lead_answer", "lead_until", "script_runtime"]

Answer = Callable[[ModelRequest], Awaitable[ModelResponse]]
Handler = Callable[[Mapping[str, Any], ToolContext], Awaitable[object]]


def script_runtime(
    store: SQLiteStore | str,
    project: str,
    home: str,
    answer: Answer,
    *,
    read: Handler | None = None,
    settings: Settings | None = None,
) -> SubagentRuntime:
    """A runtime on ``store`` (a SQLite store or its file) whose children all answer with
    ``answer``; ``read`` is the handler of a registered ``Read`` tool. Without ``settings``
    the catalog loads them from the project and home folders."""
    root = Path(project)
    registry = ToolRegistry()
    if read is not None:
        schema = {"type": "object", "additionalProperties": True}
        registry.register(
            Tool(name="Read", description="Read a file.", input_schema=schema, handler=read)
        )
    return SubagentRuntime(
        catalog=Catalog(project=root, home=Path(home), settings=settings),
        registry=registry,
        provider=InProcessProvider(FunctionModel(answer)),
        store=SQLiteStore(store) if isinstance(store, str) else store,
        options=RuntimeOptions(settings=settings, project=root),
    )


def lead_answer(request: ModelRequest) -> ModelResponse:
    """The lead's turns: it starts ``worker`` in the background with ``Task``, then calls
    ``Read``."""
    replies = sum(1 for message in request.messages if message.role == "assistant")
    if replies == 0:
        start = ToolCall(
            "lead-1", "Task", {"agent": "worker", "task": "survey", "background": True}
        )
        return ModelResponse(tool_calls=(start,), stop_reason="tool_calls")
    return ModelResponse(tool_calls=(ToolCall("lead-2", "Read", {}),), stop_reason="tool_calls")


async def lead_until(
    db: str, project: str, home: str, *, answer: Answer, read: Handler, point: str
) -> None:
    """Start ``lead`` (at most one level of children); once its worker emits the event kind
    ``point``, print ``{"lead": RUN_ID, "worker": RUN_ID}`` and block until killed."""
    runtime = script_runtime(db, project, home, answer, read=read, settings=Settings(max_depth=1))
    async with runtime, runtime.events() as stream:
        lead = await runtime.start(SubagentStartRequest("lead", "delegate the survey"))
        async for event in stream:
            if event.agent == "worker" and event.kind == point:
                print(json.dumps({"lead": lead.run_id, "worker": event.run_id}), flush=True)
                await anyio.sleep_forever()
