"""Runs a lead with a token budget on a project's state file, spends TURNS responses of 100
tokens each, prints the run id, then hangs on its next request until the process is killed.

Usage: spend_then_hang.py PROJECT STATE_DB LIMIT TURNS
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

from membrane import SubagentRuntime, SubagentStartRequest, Usage
from membrane.models import ModelRequest, ModelResponse, ToolCall
from membrane.testing import FunctionModel


async def main(project: str, state: str, limit: int, turns: int) -> None:
    async def reply(request: ModelRequest) -> ModelResponse:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn == turns:
            print(json.dumps({"run_id": request.run_id}), flush=True)
            await anyio.sleep_forever()
        call = ToolCall(id=f"read-{turn}", name="Read", arguments={"file_path": "notes.txt"})
        usage = Usage(input_tokens=70, output_tokens=30)
        return ModelResponse(tool_calls=(call,), stop_reason="tool_calls", usage=usage)

    runtime = SubagentRuntime.open(Path(project), model=FunctionModel(reply), state=Path(state))
    async with runtime:
        await runtime.run(SubagentStartRequest("lead", "read", budget={"tokens": limit}))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
