"""Runs a lead whose background worker is killed mid-run with the whole process (kill -9).

Usage: background_crash.py STATE_DB PROJECT HOME POINT

The lead starts ``worker`` in the background with ``Task``, then waits forever in ``Read``.
The worker calls ``Read`` once and then waits forever for its model. Once the worker reaches
POINT (``published``: its start is committed; ``tool_call``: it asked for ``Read``;
``tool_result``: its ``Read`` answered and was stored) the script prints
``{"lead": RUN_ID, "worker": RUN_ID}`` and blocks until it is killed.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import anyio
from script_runtime import lead_answer, lead_until

from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.tools.spec import ToolContext


async def read(arguments: Mapping[str, Any], context: ToolContext) -> str:
    if context.agent == "worker":
        return "three files"
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def answer(request: ModelRequest) -> ModelResponse:
    if request.agent != "worker":
        return lead_answer(request)
    if not any(message.role == "assistant" for message in request.messages):
        return ModelResponse(tool_calls=(ToolCall("w-1", "Read", {}),), stop_reason="tool_calls")
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


if __name__ == "__main__":
    db, project, home, point = sys.argv[1:5]
    anyio.run(lambda: lead_until(db, project, home, answer=answer, read=read, point=point))
