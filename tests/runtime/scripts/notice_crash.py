"""Runs a lead whose background worker ends while the lead is busy, then blocks until killed.

Usage: notice_crash.py STATE_DB PROJECT HOME

The lead starts ``worker`` in the background with ``Task`` (turn 1), then calls ``Read``
(turn 2), which never returns. The worker answers once ``Read`` has started, so its end, and
the completion notice it owes the lead, are committed while the notice can only wait for the
lead's next turn boundary. Once the worker's end is committed the script prints
``{"lead": RUN_ID, "worker": RUN_ID}``, and the process is killed with the notice undelivered.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import anyio
from script_runtime import lead_answer, lead_until

from membrane.models.base import ModelRequest, ModelResponse
from membrane.tools.spec import ToolContext

HOLDING = anyio.Event()


async def hold(arguments: Mapping[str, Any], context: ToolContext) -> str:
    HOLDING.set()
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def answer(request: ModelRequest) -> ModelResponse:
    if request.agent != "worker":
        return lead_answer(request)
    await HOLDING.wait()
    return ModelResponse(text="the survey found 3 files")


if __name__ == "__main__":
    db, project, home = sys.argv[1:4]
    anyio.run(lambda: lead_until(db, project, home, answer=answer, read=hold, point="completed"))
