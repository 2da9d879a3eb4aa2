"""Spawn cost: a whole delegation through Membrane against pydantic-ai delegating to a second
Agent, and memory per child.

1. A delegation, whole runs on both sides: a parent whose model calls the delegation tool
   once, a child that answers at once, and the parent's final answer, from the call that
   starts the parent to its result. Membrane: ``runtime.run()`` of a ``lead`` whose ``Task``
   starts a ``worker`` (in process, on a scripted model), in memory (the goal: the peer keeps
   nothing either) and on a SQLite file under ``full`` (durable at every step; printed). The
   peer: a parent ``Agent`` whose tool runs a child ``Agent``, both on ``TestModel``,
   ``parent.run()``. Samples of the sides alternate, in one process and one event loop. Goal:
   Membrane's delegation in memory at most half the peer's.
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
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import (
    InProcessProvider,
    RuntimeOptions,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.store import MemoryStore, SQLiteStore
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
    (agents / "lead.md").write_text(
        "---\nname: lead\ndescription: Delegates.\nallowed_subagents: [worker]\n---\nDelegate.\n"
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


def membrane_delegation(
    root: Path, *, durable: bool
) -> tuple[SubagentRuntime, Callable[[], Awaitable[float]]]:
    """A runtime (to open) and one sample: seconds of a whole delegation, lead -> worker, on
    a SQLite file under ``full`` (``durable``) or in memory."""
    catalog, registry, settings = _project(root, children=10)

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "lead" and not any(m.role == "tool" for m in request.messages):
            call = ToolCall("t1", "Task", {"agent": "worker", "task": "count the TODOs"})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        return ModelResponse(text="done")

    runtime = SubagentRuntime(
        catalog=catalog,
        registry=registry,
        provider=InProcessProvider(FunctionModel(answer)),
        store=SQLiteStore(root.parent / f"{root.name}-state.db") if durable else MemoryStore(),
        options=RuntimeOptions(settings=settings, project=root),
    )

    async def sample() -> float:
        begin = time.perf_counter()
        result = await runtime.run(SubagentStartRequest("lead", "count the TODOs"))
        elapsed = time.perf_counter() - begin
        assert result.status == "completed", result
        return elapsed

    return runtime, sample


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


def _peer() -> Callable[[], Awaitable[float]] | None:
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

    return delegation


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
    peer = _peer()
    with tempfile.TemporaryDirectory() as folder:
        memory_runtime, in_memory = membrane_delegation(
            Path(folder) / "memory-start", durable=False
        )
        durable_runtime, durable = membrane_delegation(Path(folder) / "start", durable=True)
        samples: dict[str, list[float]] = {"memory": [], "durable": [], "peer": []}
        async with memory_runtime, durable_runtime:
            sides = {"memory": in_memory, "durable": durable}
            if peer is not None:
                sides["peer"] = peer
            for _ in range(20):  # warm every side
                for sample in sides.values():
                    await sample()
            for _ in range(ROUNDS):  # the sides in turn
                for name, sample in sides.items():
                    samples[name].append(await sample())
        per_child = await membrane_memory(Path(folder) / "memory")
    mine = statistics.median(samples["memory"])
    stored = statistics.median(samples["durable"])
    print(
        f"membrane delegation, lead -> Task -> worker -> lead's answer (median of {ROUNDS}): "
        f"in memory {_ms(mine)}, SQLite under full {_ms(stored)}"
    )
    print(
        f"membrane peak memory per background child ({CHILDREN} at once): "
        f"{per_child / 1024:.1f} KiB"
    )
    if peer is None:
        print("pydantic-ai is not installed (make .venv/.installed-bench); no ratios")
        return
    delegated = statistics.median(samples["peer"])
    print(
        f"pydantic-ai parent delegating to a child Agent (TestModel), whole run: {_ms(delegated)}"
    )
    print(f"  membrane on SQLite under full, durable at every step: {stored / delegated:.2f}x")
    ratio = mine / delegated
    verdict = "met" if ratio <= 0.5 else "missed"
    print(
        "goal a whole delegation in memory vs pydantic-ai's (interleaved): <= 0.50x, "
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
