"""Runs five children with the garbage collector off, in a process of its own, and counts what
the collector then finds (nothing, when finished children leave no reference cycles).

Usage: child_cycles.py PROJECT HOME BACKGROUND

``PROJECT`` holds the ``worker`` agent; ``BACKGROUND`` is ``1`` to start the children in the
background. Prints one JSON line: ``{"found": N, "garbage": "..."}``, the second naming the
kinds of object found, the code of any frames among them, and the threads alive.
"""

from __future__ import annotations

import gc
import json
import sys
import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
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
from membrane.store import MemoryStore
from membrane.testing import FunctionModel
from membrane.tools.registry import ToolRegistry
from membrane.tools.spec import Tool, ToolContext


async def answer(request: ModelRequest) -> ModelResponse:
    if not any(m.role == "tool" for m in request.messages):
        return ModelResponse(
            tool_calls=(ToolCall("c1", "Read", {"path": "a"}),), stop_reason="tool_calls"
        )
    return ModelResponse(text="done")


async def read(arguments: Mapping[str, Any], context: ToolContext) -> str:
    return f"Read ran with {dict(arguments)} in {context.cwd}"


def described(garbage: list[object]) -> str:
    kinds = Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in garbage)
    frames = sorted(
        {f"{o.f_code.co_filename}:{o.f_code.co_name}" for o in garbage if isinstance(o, FrameType)}
    )
    threads = [t.name for t in threading.enumerate()]
    return f"{kinds.most_common(20)}; frames {frames}; threads {threads}"


async def main(project: Path, home: Path, background: bool) -> dict[str, object]:
    settings = Settings()
    registry = ToolRegistry()
    registry.register(Tool("Read", "The Read tool.", {"type": "object"}, read))
    runtime = SubagentRuntime(
        catalog=Catalog(project=project, home=home, settings=settings),
        registry=registry,
        provider=InProcessProvider(FunctionModel(answer)),
        store=MemoryStore(),
        options=RuntimeOptions(settings=settings, project=project),
    )
    async with runtime:
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
            gc.set_debug(gc.DEBUG_SAVEALL)  # kept, so that a failure names what was found
            found = gc.collect()
        finally:
            gc.set_debug(0)
            gc.enable()
    return {"found": found, "garbage": described(gc.garbage)}


if __name__ == "__main__":
    report = anyio.run(main, Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "1")
    print(json.dumps(report))
