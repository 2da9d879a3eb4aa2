"""Durable bookkeeping cost: batched durable starts against the same in memory, messages
against raw SQLite, and the outbox's delivery latency against a polling drainer, in one run on
one disk.

1. Batched durable starts: ``runtime.start_many()`` of 1,000 background children (each with
   a ``request_id``; one barrier for the batch) on a ``SQLiteStore`` file under
   ``synchronous=full``, against the same batch on a ``MemoryStore``, rounds of the two
   alternating. Goal: at most 2x the in-memory batch. Each child waits at its model, so both
   sides time the starts alone. One ``start()`` after another, each durable on its own (one
   sync each), is printed beside them.
2. Durable messages/s: ``runtime.message()`` with a ``request_id`` (receipt pending, delivery
   and receipt completion in one transaction) to a stored run, each made durable
   (``store.barrier()``), against a raw ``sqlite3`` loop replaying exactly the rows those
   messages wrote (every write statement with its bound values and every transaction
   boundary, as the store ran them: ``replay_support``) on a fresh file of the same schema.
   The raw loop syncs the WAL as many times as Membrane's flusher did, no more: its commits
   run under ``synchronous=NORMAL`` and it ``fsync``s the WAL after its units, spread as
   evenly as Membrane's syncs were. Goal: at least 0.5x.
3. Outbox delivery latency: from a background child's final answer (its end is written just
   after) to its live parent seeing the completion notice (the parent's next model request
   carries it, so the parent's turn boundary is included), against a drainer that polls the
   same store's outbox every 100 ms (from the item's write to the poll that reads it). Goal:
   at most 0.5x the poller's; the ratio is printed.

Sequential durable ``run()``s against the raw replay of their rows are printed too (the goal
of at least 0.5x is retired: it drove hand-written replacements of standard tools).

Run: ``.venv/bin/python bench/bench_durable.py``; ``ROUNDS`` changes the number of samples,
``BATCH`` the size of a batch.
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
from membrane.store import MemoryStore, SQLiteStore
from membrane.testing import FunctionModel
from membrane.tools.registry import ToolRegistry
from membrane.tools.spec import Tool, ToolContext
from replay_support import Recorder, replay

ROUNDS = int(os.environ.get("ROUNDS", 300))
BATCH = int(os.environ.get("BATCH", 1_000))
BATCH_ROUNDS = 3
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


def _runtime(root: Path, store: SQLiteStore | MemoryStore, model: FunctionModel) -> SubagentRuntime:
    registry = ToolRegistry()

    async def idle(arguments: object, context: ToolContext) -> str:
        await anyio.sleep(0)
        return "idle"

    registry.register(Tool("Idle", "Wait a moment.", {"type": "object"}, idle, origin="host"))
    settings = Settings(max_concurrency=BATCH + 10)
    return SubagentRuntime(
        catalog=Catalog(project=root, home=root / "home", settings=settings),
        registry=registry,
        provider=InProcessProvider(model),
        store=store,
        options=RuntimeOptions(settings=settings, project=root),
    )


class _Syncs:
    """The store's ``fsync``, counted."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, fd: int) -> None:
        self.count += 1
        os.fsync(fd)


async def _traced(folder: Path, name: str, stored: bool) -> tuple[float, float, float, float]:
    """Durable starts (or, with ``stored``, messages to a stored run) per second, and the same
    rows per second through the raw loop syncing as often; then the CPU seconds of one on each
    side (the process's, the flusher's thread included: robust where other work shares the
    disk)."""
    root = _project(folder / name)
    syncs = _Syncs()
    store = SQLiteStore(folder / f"{root.name}-state.db", fsync=syncs)  # outside the project
    recorder = Recorder()
    recorder.attach(store)

    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="done")

    async with _runtime(root, store, FunctionModel(answer)) as runtime:
        first = await runtime.run(SubagentStartRequest("worker", "first", request_id="warm"))
        await store.barrier()
        recorder.clear()
        synced = syncs.count
        begin, cpu = time.perf_counter(), time.process_time()
        for i in range(ROUNDS):
            if stored:
                runtime.message(first.run_id, f"note {i}", request_id=f"m{i}")
                await store.barrier()  # durable, as the raw loop's synced units are
            else:
                await runtime.run(SubagentStartRequest("worker", f"job {i}", request_id=f"r{i}"))
            recorder.mark()
        durable, cpu = time.perf_counter() - begin, time.process_time() - cpu
        synced = syncs.count - synced
    store.close()
    raw_cpu = time.process_time()
    raw = replay(
        recorder, folder / f"{name}-raw.db", synchronous="normal", as_recorded=True, syncs=synced
    )
    raw_cpu = time.process_time() - raw_cpu
    return ROUNDS / durable, ROUNDS / raw, cpu / ROUNDS, raw_cpu / ROUNDS


async def _batch(folder: Path, name: str, *, durable: bool) -> float:
    """Seconds ``start_many`` takes to acknowledge a batch of BATCH background children on a
    SQLite file under ``full`` (``durable``) or in memory; each child waits at its model."""
    root = _project(folder / name)
    store: SQLiteStore | MemoryStore
    store = SQLiteStore(folder / f"{name}-state.db") if durable else MemoryStore()
    release = anyio.Event()
    held: list[bool] = []  # set once warm: the warm-up run answers at once

    async def answer(request: ModelRequest) -> ModelResponse:
        if held:
            await release.wait()
        return ModelResponse(text="done")

    requests = [
        SubagentStartRequest("worker", f"job {i}", background=True, request_id=f"b{i}")
        for i in range(BATCH)
    ]
    async with _runtime(root, store, FunctionModel(answer)) as runtime:
        await runtime.run(SubagentStartRequest("worker", "warm", request_id="warm"))
        held.append(True)
        begin = time.perf_counter()
        await runtime.start_many(requests)
        elapsed = time.perf_counter() - begin
        release.set()
    if isinstance(store, SQLiteStore):
        store.close()
    return elapsed


async def _one_by_one(folder: Path) -> float:
    """Seconds for BATCH background ``start()``s one after another, each durable on its own."""
    root = _project(folder / "one-by-one")
    store = SQLiteStore(folder / "one-by-one-state.db")
    release = anyio.Event()
    held: list[bool] = []  # set once warm: the warm-up run answers at once

    async def answer(request: ModelRequest) -> ModelResponse:
        if held:
            await release.wait()
        return ModelResponse(text="done")

    async with _runtime(root, store, FunctionModel(answer)) as runtime:
        await runtime.run(SubagentStartRequest("worker", "warm", request_id="warm"))
        held.append(True)
        begin = time.perf_counter()
        for i in range(BATCH):
            request = SubagentStartRequest(
                "worker", f"job {i}", background=True, request_id=f"s{i}"
            )
            await runtime.start(request)
        elapsed = time.perf_counter() - begin
        release.set()
    store.close()
    return elapsed


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
        batched: list[float] = []
        in_memory: list[float] = []
        for n in range(BATCH_ROUNDS):  # the two sides in turn, so the disk's load moves both
            batched.append(await _batch(folder, f"batch-full-{n}", durable=True))
            in_memory.append(await _batch(folder, f"batch-memory-{n}", durable=False))
        one_by_one = await _one_by_one(folder)
        start_rate, start_raw, start_cpu, start_raw_cpu = await _traced(
            folder, "starts", stored=False
        )
        message_rate, message_raw, _, _ = await _traced(folder, "messages", stored=True)
        ours = await _membrane_latency(folder)
        polled = await _polling_latency(folder)
    full, memory = statistics.median(batched), statistics.median(in_memory)
    print(
        f"start_many of {BATCH} background children: full {full * 1e3:.1f} ms, in memory "
        f"{memory * 1e3:.1f} ms (medians of {BATCH_ROUNDS}, in turn)"
    )
    print(
        f"  {BATCH} start()s one after another, each durable: {one_by_one * 1e3:.1f} ms "
        f"({one_by_one / full:.1f}x the batch)"
    )
    same = "raw SQLite of the same rows, as many syncs"
    print(f"durable run()s:   {start_rate:9.0f}/s  {same} {start_raw:9.0f}/s (no goal)")
    print(
        f"  CPU per durable run {start_cpu * 1e3:.2f} ms, the raw rows'"
        f" {start_raw_cpu * 1e3:.2f} ms ({start_raw_cpu / start_cpu:.2f}x)"
    )
    print(f"durable messages: {message_rate:9.0f}/s  {same} {message_raw:9.0f}/s")
    print(f"delivery latency: {ours * 1e3:9.2f} ms  100 ms polling drainer {polled * 1e3:9.2f} ms")
    ratio = full / memory
    _goal(
        f"{BATCH} background starts with start_many under full vs in memory",
        "at most 2x",
        f"{ratio:.2f}x",
        ratio <= 2,
    )
    ratio = message_rate / message_raw
    _goal(
        "durable messages/s vs raw SQLite syncing as often",
        "at least 0.5x",
        f"{ratio:.2f}x",
        ratio >= 0.5,
    )
    ratio = ours / polled
    _goal(
        "outbox delivery latency vs a 100 ms polling drainer",
        "at most 0.5x",
        f"{ratio:.3f}x ({ours * 1e3:.2f} ms vs {polled * 1e3:.1f} ms)",
        ratio <= 0.5,
    )


if __name__ == "__main__":
    anyio.run(main)
