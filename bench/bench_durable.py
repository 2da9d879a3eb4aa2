"""Durable bookkeeping cost: starts and messages against raw SQLite, and the outbox's delivery
latency against a polling drainer, in one run on one disk.

1. Durable starts/s: ``runtime.run()`` of a child with a ``request_id`` (receipt, header, lease,
   events, transcript, end) on a ``SQLiteStore`` file, one after another. The limit: a raw
   ``sqlite3`` loop replaying exactly the rows those starts wrote (every write statement with
   its bound values and every transaction boundary, as the store ran them:
   ``replay_support``) on a fresh file of the same schema and pragmas, in the same folder.
   Goal: at least 0.5x the limit.
2. Durable messages/s: ``runtime.message()`` with a ``request_id`` (receipt pending, delivery
   and receipt completion in one transaction) to a stored run, against the raw replay of its
   rows the same way. Goal: at least 0.5x.
3. Outbox delivery latency: from a background child's final answer (its end is written just
   after) to its live parent seeing the completion notice (the parent's next model request
   carries it, so the parent's turn boundary is included), against a drainer that polls the
   same store's outbox every 100 ms (from the item's write to the poll that reads it). Goal:
   at most 0.5x the poller's; the ratio is printed.

Both stores sync every commit (``synchronous=FULL``, the store's default), so the disk's
fsync rate bounds both sides.

Run: ``.venv/bin/python bench/bench_durable.py``; ``ROUNDS`` changes the number of samples.
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from membrane.agents.catalog import Catalog
from membrane.config.values import Settings
from membrane.json_types import JSONValue
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
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
from replay_support import Recorder, replay

ROUNDS = int(os.environ.get("ROUNDS", 300))
LATENCY_SAMPLES = max(10, ROUNDS // 10)
POLL = 0.1


def _project(root: Path) -> Path:
    agents = root / ".membrane" / "agents"
    agents.mkdir(parents=True)
    for name, extra in (("worker", ""), ("lead", "allowed_subagents: [worker]\ntools: [Idle]\n")):
        (agents / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: The {name}.\n{extra}---\nWork.\n", encoding="utf-8"
        )
    return root


def _runtime(root: Path, store: SQLiteStore, model: FunctionModel) -> SubagentRuntime:
    registry = ToolRegistry()

    async def idle(arguments: object, context: ToolContext) -> str:
        await anyio.sleep(0)
        return "idle"

    registry.register(Tool("Idle", "Wait a moment.", {"type": "object"}, idle, origin="host"))
    settings = Settings()
    return SubagentRuntime(
        catalog=Catalog(project=root, home=root / "home", settings=settings),
        registry=registry,
        provider=InProcessProvider(model),
        store=store,
        options=RuntimeOptions(settings=settings, project=root),
    )


async def _traced(folder: Path, name: str, stored: bool) -> tuple[float, float, float, float]:
    """Durable starts (or, with ``stored``, messages to a stored run) per second, and the same
    rows per second through the raw loop; then the CPU seconds of one on each side (the
    process's, the flusher's thread included: robust where other work shares the disk)."""
    root = _project(folder / name)
    store = SQLiteStore(folder / f"{root.name}-state.db")  # outside the project
    recorder = Recorder()
    recorder.attach(store)

    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="done")

    async with _runtime(root, store, FunctionModel(answer)) as runtime:
        first = await runtime.run(SubagentStartRequest("worker", "first", request_id="warm"))
        recorder.clear()
        begin, cpu = time.perf_counter(), time.process_time()
        for i in range(ROUNDS):
            if stored:
                runtime.message(first.run_id, f"note {i}", request_id=f"m{i}")
                await store.barrier()  # durable, as the raw loop's synced COMMIT is
            else:
                await runtime.run(SubagentStartRequest("worker", f"job {i}", request_id=f"r{i}"))
            recorder.mark()
        durable, cpu = time.perf_counter() - begin, time.process_time() - cpu
    store.close()
    raw_cpu = time.process_time()
    raw = replay(recorder, folder / f"{name}-raw.db", synchronous="full", as_recorded=True)
    raw_cpu = time.process_time() - raw_cpu
    return ROUNDS / durable, ROUNDS / raw, cpu / ROUNDS, raw_cpu / ROUNDS


async def _membrane_latency(folder: Path) -> float:
    """Median seconds from a background child's answer to its parent's model seeing it."""
    root = _project(folder / "latency")
    store = SQLiteStore(folder / f"{root.name}-state.db")  # outside the project
    ended: dict[str, float] = {}
    seen: list[float] = []
    started: set[str] = set()

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "worker":
            ended[request.messages[0].content] = time.perf_counter()
            return ModelResponse(text="done")
        users = [m.content for m in request.messages if m.role == "user"]
        notices = sum(1 for u in users if u.startswith("<task_notification "))
        if notices > len(seen):
            seen.append(time.perf_counter() - ended[f"job {len(seen)}"])
        if len(seen) >= LATENCY_SAMPLES:
            return ModelResponse(text="all seen")
        job = f"job {len(seen)}"
        if job not in started:
            started.add(job)
            args: dict[str, JSONValue] = {"agent": "worker", "task": job, "background": True}
            call = ToolCall(f"t{len(seen)}", "Task", args)
        else:
            call = ToolCall(f"i{len(request.messages)}", "Idle", {})
        return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")

    async with _runtime(root, store, FunctionModel(answer)) as runtime:
        await runtime.run(SubagentStartRequest("lead", "start workers one by one"))
    store.close()
    return statistics.median(seen)


async def _polling_latency(folder: Path) -> float:
    """Median seconds from an outbox write to a 100 ms polling drainer seeing it."""
    store = SQLiteStore(folder / "poll.db")
    written: dict[int, float] = {}
    latencies: list[float] = []

    async def poller() -> None:
        while len(latencies) < LATENCY_SAMPLES:
            for item in store.due_outbox():
                latencies.append(time.perf_counter() - written[item.id])
                store.mark_delivered(item.id)
            await anyio.sleep(POLL)

    async def writer() -> None:
        for _ in range(LATENCY_SAMPLES):
            await anyio.sleep(random.uniform(0, POLL) + POLL)
            item = store.enqueue_outbox("parent", {"kind": "completion"})
            written[item] = time.perf_counter()

    async with anyio.create_task_group() as group:
        group.start_soon(poller)
        group.start_soon(writer)
    store.close()
    return statistics.median(latencies)


def _goal(what: str, target: str, measured: str, met: bool) -> None:
    print(f"goal {what}: {target}, measured {measured} ({'met' if met else 'missed'})")


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-durable-") as tmp:
        folder = Path(tmp)
        start_rate, start_raw, start_cpu, start_raw_cpu = await _traced(
            folder, "starts", stored=False
        )
        message_rate, message_raw, _, _ = await _traced(folder, "messages", stored=True)
        ours = await _membrane_latency(folder)
        polled = await _polling_latency(folder)
    same = "raw SQLite of the same rows"
    print(f"durable starts:   {start_rate:9.0f}/s  {same} {start_raw:9.0f}/s")
    print(
        f"  CPU per durable start {start_cpu * 1e3:.2f} ms, the raw rows'"
        f" {start_raw_cpu * 1e3:.2f} ms ({start_raw_cpu / start_cpu:.2f}x)"
    )
    print(f"durable messages: {message_rate:9.0f}/s  {same} {message_raw:9.0f}/s")
    print(f"delivery latency: {ours * 1e3:9.2f} ms  100 ms polling drainer {polled * 1e3:9.2f} ms")
    ratio = start_rate / start_raw
    _goal("durable starts/s vs raw SQLite", "at least 0.5x", f"{ratio:.2f}x", ratio >= 0.5)
    ratio = message_rate / message_raw
    _goal("durable messages/s vs raw SQLite", "at least 0.5x", f"{ratio:.2f}x", ratio >= 0.5)
    ratio = ours / polled
    _goal(
        "outbox delivery latency vs a 100 ms polling drainer",
        "at most 0.5x",
        f"{ratio:.3f}x ({ours * 1e3:.2f} ms vs {polled * 1e3:.1f} ms)",
        ratio <= 0.5,
    )


if __name__ == "__main__":
    anyio.run(main)
