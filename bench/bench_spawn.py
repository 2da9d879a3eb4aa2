"""Spawn cost: Membrane's start() against pydantic-ai delegating to a second Agent.

1. Start overhead: the time from ``SubagentRuntime.start()`` to the child's first model request,
   in process, on a scripted model, with the durable SQLite header written. The peer is
   pydantic-ai: a parent ``Agent`` whose tool runs a child ``Agent``, both on ``TestModel``, and
   that child's ``Agent.run`` alone. Goal: Membrane's overhead is at most half of the peer's
   child ``Agent.run``.
2. Memory: peak traced memory per child with 1,000 concurrent background children in one
   process, against the peer's 1,000 concurrent child runs. Goal: at most half.

Run: ``.venv/bin/python bench/bench_spawn.py``; the peer comes from
``make .venv/.installed-bench``. ``ROUNDS`` in the environment changes the number of samples.
"""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from membrane.agents.catalog import Catalog
from membrane.config.values import Settings
from membrane.models.base import ModelRequest, ModelResponse
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

try:
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.messages import ModelMessage, TextPart
    from pydantic_ai.messages import ModelResponse as PeerResponse
    from pydantic_ai.models.function import AgentInfo
    from pydantic_ai.models.function import FunctionModel as PeerFunctionModel
    from pydantic_ai.models.test import TestModel

    HAVE_PEER = True
except ImportError:  # the peer is optional: make .venv/.installed-bench
    HAVE_PEER = False

ROUNDS = int(__import__("os").environ.get("ROUNDS", 300))
CHILDREN = 1_000


async def _read(arguments: object, context: ToolContext) -> str:
    return "text"


def _project(root: Path, *, children: int) -> tuple[Catalog, ToolRegistry, Settings]:
    agents = root / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "worker.md").write_text(
        "---\nname: worker\ndescription: Reads files.\ntools: Read, Grep\n---\nRead and report.\n"
    )
    registry = ToolRegistry()
    for name in ("Read", "Grep", "Glob"):
        registry.register(
            Tool(name=name, description=name, input_schema={"type": "object"}, handler=_read)
        )
    settings = Settings(max_concurrency=children)
    home = root / "home"
    home.mkdir()
    return Catalog(project=root, home=home, settings=settings), registry, settings


async def membrane_start_overhead(root: Path) -> list[float]:
    """Seconds from start() to the child's first model request, one sample per start."""
    catalog, registry, settings = _project(root, children=10)
    first_request: dict[str, float] = {}

    async def answer(request: ModelRequest) -> ModelResponse:
        first_request.setdefault(request.run_id, time.perf_counter())
        return ModelResponse(text="done")

    runtime = SubagentRuntime(
        catalog=catalog,
        registry=registry,
        provider=InProcessProvider(FunctionModel(answer)),
        store=SQLiteStore(root.parent / f"{root.name}-state.db"),  # outside the project
        options=RuntimeOptions(settings=settings, project=root),
    )
    samples: list[float] = []
    async with runtime:
        for _ in range(ROUNDS):
            begin = time.perf_counter()
            info = await runtime.start(SubagentStartRequest("worker", "count the TODOs"))
            await runtime.wait(info.run_id)
            samples.append(first_request[info.run_id] - begin)
    return samples


async def membrane_memory(root: Path) -> float:
    """Peak traced bytes per child with CHILDREN background children alive at once."""
    catalog, registry, settings = _project(root, children=CHILDREN)
    release = anyio.Event()
    waiting = 0
    all_waiting = anyio.Event()
    hold = False

    async def answer(request: ModelRequest) -> ModelResponse:
        nonlocal waiting
        if hold:
            waiting += 1
            if waiting == CHILDREN:
                all_waiting.set()
            await release.wait()
        return ModelResponse(text="done")

    runtime = SubagentRuntime(
        catalog=catalog,
        registry=registry,
        provider=InProcessProvider(FunctionModel(answer)),
        store=SQLiteStore(root.parent / f"{root.name}-state.db"),  # outside the project
        options=RuntimeOptions(settings=settings, project=root),
    )
    async with runtime:
        await runtime.run(SubagentStartRequest("worker", "warm up"))
        hold = True
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        for i in range(CHILDREN):
            await runtime.start(SubagentStartRequest("worker", f"job {i}", background=True))
        await all_waiting.wait()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        release.set()
    return (peak - base) / CHILDREN


def _peer() -> tuple[Callable[[], Awaitable[float]], Callable[[], Awaitable[float]]] | None:
    if not HAVE_PEER:
        return None

    child = Agent(TestModel(custom_output_text="done"), instructions="Read and report.")
    parent = Agent(TestModel(call_tools=["delegate"]), instructions="Delegate.")

    @parent.tool
    async def delegate(ctx: RunContext[None], task: str) -> str:
        result = await child.run(task, usage=ctx.usage)
        return result.output

    async def delegation() -> float:
        begin = time.perf_counter()
        await parent.run("count the TODOs")
        return time.perf_counter() - begin

    async def child_alone() -> float:
        begin = time.perf_counter()
        await child.run("count the TODOs")
        return time.perf_counter() - begin

    return delegation, child_alone


async def peer_memory() -> float | None:
    if not HAVE_PEER:
        return None
    release = anyio.Event()
    waiting = 0
    all_waiting = anyio.Event()

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> PeerResponse:
        nonlocal waiting
        waiting += 1
        if waiting == CHILDREN:
            all_waiting.set()
        await release.wait()
        return PeerResponse(parts=[TextPart("done")])

    child = Agent(PeerFunctionModel(answer), instructions="Read and report.")
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    async with anyio.create_task_group() as group:
        for i in range(CHILDREN):
            group.start_soon(child.run, f"job {i}")
        await all_waiting.wait()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        release.set()
    return (peak - base) / CHILDREN


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        samples = await membrane_start_overhead(Path(folder) / "start")
        per_child = await membrane_memory(Path(folder) / "memory")
    membrane = statistics.median(samples)
    print(
        f"membrane start() -> first model request (median of {ROUNDS}, SQLite header): "
        f"{_ms(membrane)}"
    )
    print(
        f"membrane peak memory per background child ({CHILDREN} at once): "
        f"{per_child / 1024:.1f} KiB"
    )
    peer = _peer()
    if peer is None:
        print("pydantic-ai is not installed (make .venv/.installed-bench); no ratios")
        return
    delegation, child_alone = peer
    for _ in range(20):
        await delegation()
        await child_alone()
    delegated = statistics.median([await delegation() for _ in range(ROUNDS)])
    alone = statistics.median([await child_alone() for _ in range(ROUNDS)])
    print(f"pydantic-ai parent delegating to a child Agent (TestModel): {_ms(delegated)}")
    print(f"pydantic-ai child Agent.run alone (TestModel): {_ms(alone)}")
    ratio = membrane / alone
    print(f"ratio membrane start overhead / peer child Agent.run: {ratio:.2f}")
    verdict = "met" if ratio <= 0.5 else "missed"
    print(
        "goal start overhead vs a pydantic-ai child Agent.run: <= 0.50x, "
        f"measured {ratio:.2f}x ({verdict})"
    )
    peer_bytes = await peer_memory()
    if peer_bytes is not None:
        print(
            f"pydantic-ai peak memory per concurrent child run ({CHILDREN} at once): "
            f"{peer_bytes / 1024:.1f} KiB"
        )
        ratio = per_child / peer_bytes
        print(f"ratio membrane / peer memory per child: {ratio:.2f}")
        verdict = "met" if ratio <= 0.5 else "missed"
        print(
            "goal memory per child vs a pydantic-ai child run: <= 0.50x, "
            f"measured {ratio:.2f}x ({verdict})"
        )


if __name__ == "__main__":
    anyio.run(main)
