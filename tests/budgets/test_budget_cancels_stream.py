"""A budget ends a streaming request promptly: a worker streams through the real ``openai``
SDK from a loopback server that never finishes its reply; when its lead's response spends the
budget they share, the worker's request is cancelled (the connection goes away) and the worker
ends with ``budget-exceeded``."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from membrane import SubagentRuntime, SubagentStartRequest, Usage
from membrane.models import ModelRequest, ModelResponse, ToolCall
from membrane.models.openai import OpenAIModel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "models"))
from replay import ReplayServer, load


class _Team:
    """The lead on a scripted reply; the worker on the real adapter."""

    name = "team"

    def __init__(self, worker: OpenAIModel, server: ReplayServer) -> None:
        self._worker = worker
        self._server = server

    async def request(self, request: ModelRequest) -> ModelResponse:
        if request.agent == "worker":
            return await self._worker.request(request)
        if not any(m.role == "tool" for m in request.messages):
            task = ToolCall("t", "Task", {"agent": "worker", "task": "talk", "background": True})
            return ModelResponse(tool_calls=(task,), stop_reason="tool_calls", usage=Usage(8, 2))
        # Once the worker's reply is streaming, this answer spends the rest of the budget.
        await anyio.to_thread.run_sync(self._server.streamed.wait, 30.0)
        return ModelResponse(text="done", usage=Usage(150, 50))


@pytest.mark.anyio
async def test_a_spent_budget_cancels_a_streaming_request(team: Path, tmp_path: Path) -> None:
    with ReplayServer(load("openai", "long_stream_held")) as server:
        worker = OpenAIModel("gpt-4o", api_key="sk-test", base_url=server.url + "/v1")
        try:
            with anyio.fail_after(60):
                async with SubagentRuntime.open(
                    team, model=_Team(worker, server), state=tmp_path / "state.db"
                ) as runtime:
                    request = SubagentStartRequest("lead", "talk", budget={"tokens": 100})
                    result = await runtime.run(request)
                    (child,) = [info for info in runtime.runs() if info.agent == "worker"]
                    ended = await runtime.wait(child.run_id)
                await anyio.to_thread.run_sync(server.disconnected.wait, 30.0)
        finally:
            await worker.aclose()
    assert server.streamed.is_set() and server.disconnected.is_set()
    assert result.error is not None and result.error["code"] == "budget-exceeded"
    # Ended by the budget (not by its parent's end, which would be `stopped`).
    assert ended.status == "error" and ended.error is not None
    assert (ended.error["code"], ended.error["data"]["kind"]) == (
        "budget-exceeded",
        "tokens",
    )
