"""Whatever a model returns, it ends, at worst, that one run: siblings and the runtime go on,
and no run stays ``running`` after its task ends."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.testing import FunctionModel

from .conftest import Project

pytestmark = pytest.mark.anyio


def _forged(kind: str) -> Any:
    """A call whose fields are not what the ``ToolCall`` type promises (a model's own bytes)."""
    if kind == "arguments-none":
        return ToolCall("c1", "Read", None)  # type: ignore[arg-type]
    if kind == "arguments-list":
        return ToolCall("c1", "Read", ["file_path", "x"])  # type: ignore[arg-type]
    if kind == "arguments-string":
        return ToolCall("c1", "Read", '{"file_path": "x"}')  # type: ignore[arg-type]
    if kind == "name-int":
        return ToolCall("c1", 7, {"file_path": "x"})  # type: ignore[arg-type]
    if kind == "name-none":
        return ToolCall("c1", None, {})  # type: ignore[arg-type]
    if kind == "id-none":
        return ToolCall(None, "Read", {"file_path": "x"})  # type: ignore[arg-type]
    if kind == "arguments-object":
        return ToolCall("c1", "Read", {"file_path": object()})
    if kind == "not-a-call":
        return {"name": "Read", "arguments": {}}
    raise AssertionError(kind)


KINDS = [
    "arguments-none",
    "arguments-list",
    "arguments-string",
    "name-int",
    "name-none",
    "id-none",
    "arguments-object",
    "not-a-call",
]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_malformed_call_becomes_an_error_result_and_the_run_goes_on(
    project: Project, kind: str
) -> None:
    project.agent("worker", tools="Read")
    seen: list[str] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        results = [m for m in request.messages if m.role == "tool"]
        if not results:
            return ModelResponse(tool_calls=(_forged(kind),), stop_reason="tool_calls")
        seen.append(results[0].content)
        return ModelResponse(text="recovered")

    with anyio.fail_after(30):
        async with project.runtime(FunctionModel(answer)) as runtime:
            result = await runtime.run(SubagentStartRequest("worker", "go"))
            runs = runtime.runs()
    assert result.status == "completed" and result.text == "recovered"
    if kind == "id-none":
        # Only the id was missing: the call got one and ran.
        assert "Read ran with" in seen[0]
    else:
        assert '"code": "tool-arguments-invalid"' in seen[0]
        assert "ran with" not in seen[0]
    assert [r.status for r in runs] == ["completed"]


@pytest.mark.parametrize("bad", ["text-int", "calls-none", "calls-string"])
async def test_a_malformed_response_ends_only_its_own_run_and_a_sibling_completes(
    project: Project, bad: str
) -> None:
    project.agent("bad", tools="Read")
    project.agent("good", tools="Read")
    release = anyio.Event()

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "good":
            await release.wait()
            return ModelResponse(text="good done")
        release.set()
        if bad == "text-int":
            return ModelResponse(text=5)  # type: ignore[arg-type]
        if bad == "calls-none":
            return ModelResponse(tool_calls=None, stop_reason="tool_calls")  # type: ignore[arg-type]
        return ModelResponse(tool_calls="Read", stop_reason="tool_calls")  # type: ignore[arg-type]

    with anyio.fail_after(30):
        async with project.runtime(FunctionModel(answer)) as runtime:
            good = await runtime.start(SubagentStartRequest("good", "go", background=True))
            broken = await runtime.start(SubagentStartRequest("bad", "go", background=True))
            bad_result = await runtime.wait(broken.run_id)
            good_result = await runtime.wait(good.run_id)
            statuses = {r.agent: r.status for r in runtime.runs()}
    assert bad_result.status == "error"
    assert bad_result.error is not None and bad_result.error["code"] == "model-error"
    assert good_result.status == "completed" and good_result.text == "good done"
    assert statuses == {"good": "completed", "bad": "error"}
