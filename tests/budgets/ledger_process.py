"""One process drawing on a ledger another process keeps: it opens a runtime on the shared state
file and starts workers under the stored lead (whose budget they share), then prints one JSON
line per worker: its run id, status, error code and how many model requests it sent.

``python ledger_process.py PROJECT STATE LEAD SIGNALS ROLE WORKERS``, where ROLE is

* ``crowd``: every worker answers each turn with a Read and 15 tokens, once the file
  ``SIGNALS/go`` exists (so both processes spend at the same time);
* ``spender``: one worker spending 60 tokens a turn, once ``SIGNALS/holding`` exists; the
  process writes ``SIGNALS/spent`` when its worker has ended;
* ``waiter``: one worker whose first turn (10 tokens) calls ``hold``, a host tool that writes
  ``SIGNALS/holding`` and returns only once ``SIGNALS/spent`` exists, so the ledger runs out
  in the other process while this run is between two requests.

Waits poll a file: no timing is asserted, and a bound ends a wait that never comes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from membrane import SubagentRuntime, SubagentStartRequest, Tool, ToolContext, Usage
from membrane.models import ModelRequest, ModelResponse, ToolCall
from membrane.testing import FunctionModel

BOUND = 120.0
COSTS = {
    "crowd": Usage(input_tokens=10, output_tokens=5),
    "spender": Usage(input_tokens=50, output_tokens=10),
}
WAITER = Usage(input_tokens=8, output_tokens=2)


async def _until(path: Path) -> None:
    with anyio.fail_after(BOUND):
        while not path.exists():
            await anyio.sleep(0.01)


def _model(role: str, signals: Path, sent: dict[str, int]) -> FunctionModel:
    async def reply(request: ModelRequest) -> ModelResponse:
        sent[request.run_id] = sent.get(request.run_id, 0) + 1
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if role == "waiter":
            call = ToolCall(id=f"hold-{turn}", name="hold", arguments={})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls", usage=WAITER)
        await _until(signals / ("go" if role == "crowd" else "holding"))
        call = ToolCall(id=f"read-{turn}", name="Read", arguments={"file_path": "notes.txt"})
        return ModelResponse(tool_calls=(call,), stop_reason="tool_calls", usage=COSTS[role])

    return FunctionModel(reply)


def _hold(signals: Path) -> Tool:
    async def handler(arguments: Mapping[str, Any], context: ToolContext) -> str:
        (signals / "holding").touch()
        await _until(signals / "spent")
        return "held"

    return Tool("hold", "Wait for the other process.", {"type": "object"}, handler, origin="host")


async def main(project: Path, state: Path, lead: str, signals: Path, role: str, n: int) -> None:
    sent: dict[str, int] = {}
    async with SubagentRuntime.open(project, model=_model(role, signals, sent), state=state) as rt:
        rt.registry.register(_hold(signals))
        agent = "waiter" if role == "waiter" else "worker"
        started = [
            await rt.start(SubagentStartRequest(agent, f"part {i}", parent_id=lead))
            for i in range(n)
        ]
        ended = await rt.wait_all([info.run_id for info in started], timeout=BOUND)
    if role == "spender":
        (signals / "spent").touch()
    for info in ended:
        error = (info.result.error or {}) if info.result is not None else {}
        row = {"run_id": info.run_id, "status": info.status, "code": error.get("code")}
        print(json.dumps({**row, "requests": sent.get(info.run_id, 0)}), flush=True)


if __name__ == "__main__":
    project, state, lead, signals, role, workers = sys.argv[1:]
    anyio.run(main, Path(project), Path(state), lead, Path(signals), role, int(workers))
