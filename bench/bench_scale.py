"""Scale: Membrane's state on PostgreSQL, and children drained by 1, 2 and 3 workers.

Workers: the same ``CHILDREN`` children (600; ``CHILDREN`` in the environment changes it), each
one scripted turn that waits 200 ms (a model-bound load, as real runs are), are put on the DBOS
queue by a host (``provider = "dbos"``) before any worker runs; then 1, 2 or 3 real
``membrane worker --concurrency 10`` processes are started on the shared SQLite state and the
clock runs from the first worker's ready notice until every child has ended. Children per
second with each fleet, in the same run; goal: 3 workers finish them at least 2.5x faster than
one.

Storage: one start (``SubagentRuntime.start`` of a background child, returned once its
publication is committed) on ``PostgresStore`` against the same start on ``SQLiteStore``, and
against the bare SQL statements that start runs on PostgreSQL (recorded from the store during
the run, then replayed with psycopg alone on one connection, each replay rolled back), in the
same run. Goals: a start on PostgreSQL costs at most 2x the bare statements it runs (what the
store and the runtime add over the round trips) and at most 3x the same start on SQLite.

The database is a private cluster started for the run (``tests/pg_support.py``: ``initdb`` into
a temporary folder, a Unix socket, ``fsync=off`` for both sides alike); without PostgreSQL the
bench says so and measures nothing.

Run: ``.venv/bin/python bench/bench_scale.py``; ``ROUNDS`` in the environment changes the number
of samples.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg

from membrane.agents.catalog import Catalog
from membrane.config.values import Settings
from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import (
    InProcessProvider,
    RuntimeOptions,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.store import PostgresStore, SQLiteStore, Store
from membrane.testing import FunctionModel
from membrane.tools.registry import ToolRegistry

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from pg_support import start_cluster

ROUNDS = int(os.environ.get("ROUNDS", 200))
CHILDREN = int(os.environ.get("CHILDREN", 600))
#: Every child's one turn: it waits as a model's turn would.
TURN_SECONDS = 0.2


def _drain(workers: int) -> float:
    """Seconds ``workers`` workers (``--concurrency 10`` each) take to end ``CHILDREN``
    children already on the queue, from the first worker's ready notice."""
    from runtime.fleet import Fleet, write_project

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fleet = Fleet(root, write_project(root, turns=[{"text": "done", "delay": TURN_SECONDS}]))

        async def enqueue() -> None:
            host = SubagentRuntime.open(fleet.project, state=fleet.state, home=fleet.home)
            async with host:
                for i in range(CHILDREN):
                    request = SubagentStartRequest(
                        "helper", f"child {i}", background=True, request_id=f"c{i}"
                    )
                    await host.start(request)

        anyio.run(enqueue)
        try:
            for _ in range(workers):
                fleet.start_worker(concurrency=10)
            while not any(e["event"] == "ready" for w in fleet.workers for e in w.events()):
                time.sleep(0.01)
            begin = time.perf_counter()
            reader = SQLiteStore(fleet.state, read_only=True)
            while True:
                ended = sum(1 for h in reader.page_sessions(limit=CHILDREN + 1)
                            if h.status in ("completed", "error", "stopped"))  # fmt: skip
                if ended >= CHILDREN:
                    break
                time.sleep(0.05)
            took = time.perf_counter() - begin
            reader.close()
        finally:
            fleet.stop()
        return took


def workers_half() -> None:
    """Children per second with 1, 2 and 3 workers (module docstring)."""
    took = {n: _drain(n) for n in (1, 2, 3)}
    for n, seconds in took.items():
        print(
            f"{n} worker(s), --concurrency 10: {CHILDREN} children of one {TURN_SECONDS:.1f} s "
            f"turn in {seconds:.1f} s, {CHILDREN / seconds:.1f} children/s"
        )
    speedup = took[1] / took[3]
    met = "met" if speedup >= 2.5 else "missed"
    print(
        f"goal 3 workers finish the same {CHILDREN} children at least 2.5x faster than 1 "
        f"(SQLite state): >= 2.50x, measured {speedup:.2f}x ({met})"
    )


class RecordingStore(PostgresStore):
    """A ``PostgresStore`` that records every statement (and its parameters) while
    ``recording`` is set."""

    recording = False

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.statements: list[tuple[Any, Any]] = []

    @contextmanager
    def _use(self, action: str, *, block: bool = False) -> Iterator[psycopg.Cursor[Any]]:
        if not self.recording:
            with super()._use(action, block=block) as cur:
                yield cur
            return
        nested = self._bound() is not None
        if block:  # psycopg's own BEGIN/COMMIT, or a savepoint inside a transaction
            self.statements.append(("SAVEPOINT s" if nested else "BEGIN", None))
        with super()._use(action, block=block) as cur:
            yield _Traced(cur, self.statements)  # type: ignore[misc]
        if block:
            self.statements.append(("RELEASE s" if nested else "COMMIT", None))

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        top = self.recording and self._bound() is None
        if top:
            self.statements.append(("BEGIN", None))
        with super()._transaction():
            yield
        if top:
            self.statements.append(("COMMIT", None))


class _Traced:
    """A cursor that notes each statement it runs (everything else is the cursor's own)."""

    def __init__(self, cur: psycopg.Cursor[Any], sink: list[tuple[str, Any]]) -> None:
        self._cur = cur
        self._sink = sink

    def execute(self, query: Any, params: Any = None) -> psycopg.Cursor[Any]:
        self._sink.append((query, params))
        return self._cur.execute(query, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


def _project(root: Path) -> tuple[Catalog, ToolRegistry, Settings]:
    agents = root / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "worker.md").write_text(
        "---\nname: worker\ndescription: Answers.\n---\nAnswer the task.\n", encoding="utf-8"
    )
    home = root / "home"
    home.mkdir()
    settings = Settings(max_concurrency=10)
    return Catalog(project=root, home=home, settings=settings), ToolRegistry(), settings


async def _starts(root: Path, store: Store, *, record: RecordingStore | None = None) -> list[float]:
    """Seconds per ``start()`` (until its publication is committed), one sample per start;
    each child is waited for before the next start, outside the timing."""
    catalog, registry, settings = _project(root)

    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="done")

    runtime = SubagentRuntime(
        catalog=catalog,
        registry=registry,
        provider=InProcessProvider(FunctionModel(answer)),
        store=store,
        options=RuntimeOptions(settings=settings, project=root),
    )
    samples: list[float] = []
    async with runtime:
        await runtime.run(SubagentStartRequest("worker", "warm up"))
        for i in range(ROUNDS):
            request = SubagentStartRequest("worker", "answer", background=True, request_id=f"r{i}")
            if record is not None and i == ROUNDS - 1:
                record.recording = True
            begin = time.perf_counter()
            info = await runtime.start(request)
            samples.append(time.perf_counter() - begin)
            if record is not None:
                record.recording = False
            await runtime.wait(info.run_id)
    return samples


def _bare(url: str, statements: list[tuple[Any, Any]]) -> list[float]:
    """Seconds per replay of ``statements`` with psycopg alone on one connection, with the
    transactions the store opened around them (each ``COMMIT`` replayed as ``ROLLBACK``, so
    every replay finds the rows as the first did)."""
    samples: list[float] = []
    replay = [("ROLLBACK", None) if q == "COMMIT" else (q, p) for q, p in statements]
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(ROUNDS):
            begin = time.perf_counter()
            with conn.cursor() as cur:
                for query, params in replay:
                    cur.execute(query, params)
            samples.append(time.perf_counter() - begin)
    return samples


def _goal(what: str, target: float, measured: float) -> None:
    met = "met" if measured <= target else "missed"
    print(f"goal {what}: <= {target:.2f}x, measured {measured:.2f}x ({met})")


def main() -> None:
    workers_half()
    try:
        cluster = start_cluster()
    except RuntimeError as exc:
        print(f"bench_scale: PostgreSQL is not available, nothing measured: {exc}")
        return
    try:
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            (base / "sqlite").mkdir()
            sqlite = SQLiteStore(base / "sqlite-state.db")
            on_sqlite = anyio.run(_starts, base / "sqlite", sqlite)
            sqlite.close()

            (base / "pg").mkdir()
            url = cluster.fresh_url()
            postgres = RecordingStore(url)
            on_postgres = anyio.run(lambda: _starts(base / "pg", postgres, record=postgres))
            statements = list(postgres.statements)
            postgres.close()
            bare = _bare(url, statements)
    finally:
        cluster.stop()
    pg, lite, raw = (statistics.median(s) for s in (on_postgres, on_sqlite, bare))
    print(
        f"start, median of {ROUNDS}: PostgresStore {pg * 1e3:.2f} ms, SQLiteStore "
        f"{lite * 1e3:.2f} ms, its {len(statements)} bare statements (transactions "
        f"included) {raw * 1e3:.2f} ms"
    )
    _goal("a start on PostgresStore vs its bare SQL statements", 2.0, pg / raw)
    _goal("a start on PostgresStore vs the same start on SQLiteStore", 3.0, pg / lite)


if __name__ == "__main__":
    main()
