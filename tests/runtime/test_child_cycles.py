"""A finished child leaves nothing that only the garbage collector can free: its per-child
objects hold no reference cycles, so many live children do not make the collector's pauses
grow with them (counted with ``gc.collect()``, never timed)."""

from __future__ import annotations

import gc
import threading
from collections import Counter
from types import FrameType

import pytest
from tests.runtime.conftest import Project

from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.store import MemoryStore
from membrane.testing import FunctionModel

pytestmark = pytest.mark.anyio


async def answer(request: ModelRequest) -> ModelResponse:
    if not any(m.role == "tool" for m in request.messages):
        return ModelResponse(
            tool_calls=(ToolCall("c1", "Read", {"path": "a"}),), stop_reason="tool_calls"
        )
    return ModelResponse(text="done")


@pytest.mark.parametrize("background", [False, True])
async def test_finished_children_leave_no_reference_cycles(
    project: Project, background: bool
) -> None:
    project.agent("worker", tools="Read")
    async with project.runtime(FunctionModel(answer), store=MemoryStore()) as runtime:
        await runtime.run(SubagentStartRequest("worker", "warm up"))
        gc.collect()
        gc.disable()
        try:
            for i in range(5):
                request = SubagentStartRequest("worker", f"job {i}", background=background)
                info = await runtime.start(request)
                result = await runtime.wait(info.run_id)
                assert result.status == "completed", result
            del info, result
            # Kept, so that a failure names what was in the cycles.
            gc.set_debug(gc.DEBUG_SAVEALL)
            found = gc.collect()
        finally:
            gc.set_debug(0)
            gc.enable()
    garbage = _described(gc.garbage)
    gc.garbage.clear()
    assert found == 0, garbage


def _described(garbage: list[object]) -> str:
    """The kinds of objects the collector found, most common first, the code of any frames,
    and the threads alive (a cycle another thread left while the collector was off counts)."""
    kinds = Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in garbage)
    frames = sorted(
        {f"{o.f_code.co_filename}:{o.f_code.co_name}" for o in garbage if isinstance(o, FrameType)}
    )
    threads = [t.name for t in threading.enumerate()]
    return f"{kinds.most_common(20)}; frames {frames}; threads {threads}"
