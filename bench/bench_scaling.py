"""Scaling: every path that grows with the work, measured at several sizes against its limit.

Each curve prints, per size n, Membrane's cost, the limit or peer measured in the same run, the
ratio, and the growth between the smallest and the largest n of Membrane's per-item cost and
of its ratio to the limit (1.0 is flat; a path that is linear per item grows with n). The
goal of each curve is on the ratio's growth, at most 2x:

* turns: a whole turn of one run (model request, a ``Read`` call, events, the transcript
  written) at turn 1,000 and at turn 16,000, in memory and in SQLite under
  ``synchronous = normal``; goal at most 1.2x (a turn costs the same however long the run);
* catalog reload with nothing changed, at 100 / 1,000 / 10,000 definitions, against the stat
  of its roots (the O(roots) limit), and after 10 changed files;
* ``runtime.runs()`` with n queued children (concurrency cap 10), per listed run; its goal is
  on Membrane's own cost per listed run (at most 2x), since ``get()`` of each run grows too;
* an empty ``MemoryStore`` transaction at 100 / 1,000 / 10,000 / 100,000 sessions, against an
  uncontended lock (what a transaction must at least take).

The cold catalog load is in ``bench_catalog.py``.

Durable starts, turns, the collector and ``FunctionModel``'s record are in ``bench_children.py``;
the CLI's start in ``bench_cli.py``.

Run: ``.venv/bin/python bench/bench_scaling.py``. ``SIZES_SCALE=0.1`` shrinks every size.
"""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from membrane.agents.catalog import Catalog
from membrane.config.values import Settings
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import (
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.store import MemoryStore, SessionHeader, SQLiteStore
from membrane.testing import FunctionModel
from scaling_support import goal, runtime_for, show, sizes


def curve(
    title: str,
    rows: list[tuple[int, float, float]],
    *,
    limit: str,
    what: str,
    own: bool = False,
) -> None:
    """Print one curve and its goal: the growth, from the smallest to the largest n, of
    Membrane's cost over its limit's measured beside it (at most 2x: flat where the work is
    constant). Membrane's own growth is printed too; on a loaded machine it also carries what
    the limit shares (caches, the collector), which the ratio cancels. With ``own``, the goal
    is on Membrane's own growth: where the limit grows as well, the ratio would hide it."""
    print(f"\n{title}")
    print(f"{'n':>8}  {'membrane':>12}  {limit:>22}  {'ratio':>8}")
    for n, mine, theirs in rows:
        print(f"{n:>8}  {show(mine):>12}  {show(theirs):>22}  {mine / theirs:>7.2f}x")
    first, last = rows[0], rows[-1]
    growth = last[1] / first[1]
    relative = (last[1] / last[2]) / (first[1] / first[2])
    print(
        f"  growth from n={first[0]:,} to n={last[0]:,}: membrane {growth:.2f}x, "
        f"membrane over {limit} {relative:.2f}x"
    )
    if own:
        goal(
            f"{what} growth {first[0]:,} -> {last[0]:,}, membrane's own cost",
            "<= 2x",
            f"{growth:.2f}x (over {limit} {relative:.2f}x)",
            growth <= 2,
        )
        return
    goal(
        f"{what} growth {first[0]:,} -> {last[0]:,}, against {limit}",
        "<= 2x",
        f"{relative:.2f}x (membrane alone {growth:.2f}x)",
        relative <= 2,
    )


# -- turns ----------------------------------------------------------------------------------


class _TurnTimer:
    """A model that calls ``Read`` for ``turns`` turns and then answers, noting when each
    request arrives: the time between two requests is one whole turn of the loop (the request
    built, the call run through the view, the events, the transcript written, the next
    request), what a long run pays at each turn. It keeps nothing else."""

    name = "turns"

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.at: list[float] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.at.append(time.perf_counter())
        if len(self.at) > self.turns:
            return ModelResponse(text="done")
        call = ToolCall(id=f"c{len(self.at)}", name="Read", arguments={"path": "a.txt"})
        return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")


def turn_curve(folder: Path) -> None:
    """A whole turn's cost at turn 1,000 and at turn 16,000 of one run (the median of the 300
    turns up to each), in memory and in a SQLite store under ``synchronous = normal``."""
    early, late = sizes(1_000, 16_000)
    for kind in ("memory", "sqlite normal"):
        model = _TurnTimer(late)
        store: MemoryStore | SQLiteStore = (
            MemoryStore()
            if kind == "memory"
            else SQLiteStore(folder / f"turns-{late}.db", synchronous="normal")
        )

        async def run(model: _TurnTimer = model, store: MemoryStore | SQLiteStore = store) -> None:
            runtime = runtime_for(folder / "turns", model, store=store, concurrency=10)  # type: ignore[arg-type]
            async with runtime:
                result = await runtime.run(SubagentStartRequest("worker", "read on"))
                assert result.outcome.status == "completed", result.outcome
                assert result.outcome.turns == late + 1

        anyio.run(run)
        store.close()
        gaps = [b - a for a, b in zip(model.at, model.at[1:], strict=False)]
        first = statistics.median(gaps[early - 300 : early])
        last = statistics.median(gaps[late - 300 : late])
        print(
            f"\nWhole turn ({kind}): turn {early:,} {show(first)}, turn {late:,} {show(last)}, "
            f"{last / first:.2f}x"
        )
        goal(
            f"whole-turn cost at turn {late:,} against turn {early:,} ({kind})",
            "<= 1.2x",
            f"{last / first:.2f}x ({show(first)} -> {show(last)})",
            last / first <= 1.2,
        )


# -- catalog --------------------------------------------------------------------------------

DEFINITION = (
    "---\nname: agent-{i}\ndescription: Agent {i} reviews code.\n"
    "tools: Read, Grep\n---\nBody {i}.\n"
)


def populate(folder: Path, count: int) -> Path:
    agents = folder / "project" / ".membrane" / "agents"
    past = time.time() - 60
    for i in range(count):
        sub = agents / f"group-{i % 20}"
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"agent-{i}.md"
        path.write_text(DEFINITION.format(i=i))
        os.utime(path, (past, past))
    for sub in [*agents.iterdir(), agents]:
        os.utime(sub, (past, past))
    return agents


def timed(function: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        begin = time.perf_counter()
        function()
        samples.append(time.perf_counter() - begin)
    return statistics.median(samples)


def catalog_curve(folder: Path) -> None:
    rows, changed_rows = [], []
    for count in sizes(100, 1_000, 10_000):
        where = folder / f"c{count}"
        agents = populate(where, count)
        catalog = Catalog(project=where / "project", home=where / "home", settings=Settings())
        catalog.reload()  # arms the watcher
        roots = [str(root.directory) for root in catalog.roots]

        def stat_roots(roots: list[str] = roots) -> None:
            for root in roots:
                with contextlib.suppress(OSError):
                    os.stat(root)

        unchanged = timed(catalog.reload, 200)
        rows.append((count, unchanged, timed(stat_roots, 200)))
        files = sorted(agents.rglob("*.md"))[:10]

        def change(files: list[Path] = files) -> None:
            for i, file in enumerate(files):
                file.write_text(DEFINITION.format(i=f"x{time.perf_counter_ns()}-{i}"))

        samples, per_file = [], []
        for _ in range(9):
            change()
            begin = time.perf_counter()
            catalog.reload()
            samples.append(time.perf_counter() - begin)
            change()
            begin = time.perf_counter()
            for file in files:
                from membrane.agents.frontmatter import read_definition

                read_definition(file, root="project")
            per_file.append(time.perf_counter() - begin)
            catalog.reload()
        changed_rows.append((count, statistics.median(samples), statistics.median(per_file)))
    curve(
        "Catalog reload, nothing changed",
        rows,
        limit="stat of each root",
        what="unchanged catalog reload",
    )
    curve(
        "Catalog reload after 10 changed files",
        changed_rows,
        limit="parsing those 10 files",
        what="reload after 10 changed files",
    )


# -- the runtime ----------------------------------------------------------------------------


async def list_curve(folder: Path) -> None:
    rows = []
    for count in sizes(100, 1_000, 10_000):
        release = anyio.Event()

        async def answer(request: ModelRequest, release: anyio.Event = release) -> ModelResponse:
            await release.wait()
            return ModelResponse(text="done")

        model = FunctionModel(answer)
        runtime = runtime_for(folder / f"l{count}", model, store=MemoryStore(), concurrency=10)
        async with runtime:
            for i in range(count):
                await runtime.start(SubagentStartRequest("worker", f"job {i}", background=True))
            listing = runtime.runs
            cost = timed(listing, 20)
            per_run = cost / count

            records = [r.run_id for r in listing()]

            def info_loop(records: list[str] = records, runtime: SubagentRuntime = runtime) -> None:
                for run_id in records:
                    runtime.get(run_id)

            rows.append((count, per_run, timed(info_loop, 5) / count))
            release.set()
    curve(
        "runtime.runs() with n queued children (cap 10), per listed run",
        rows,
        limit="get() of each run",
        what="runs() per queued run",
        own=True,
    )


def memory_curve() -> None:
    rows = []
    lock = threading.RLock()

    def bare() -> None:
        with lock:
            pass

    for count in sizes(100, 1_000, 10_000, 100_000):
        store = MemoryStore()
        for i in range(count):
            store.create_session(SessionHeader(f"s{i}", "worker", None, 0, "running"))

        def empty(store: MemoryStore = store) -> None:
            with store.transaction():
                pass

        rows.append((count, timed(empty, 2_000), timed(bare, 2_000)))
    curve(
        "MemoryStore: an empty transaction",
        rows,
        limit="an uncontended lock",
        what="empty MemoryStore transaction",
    )


async def curves(folder: Path) -> None:
    catalog_curve(folder)
    await list_curve(folder)
    memory_curve()


def main() -> None:
    gc.collect()
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        turn_curve(folder)
        anyio.run(curves, folder)


if __name__ == "__main__":
    main()
