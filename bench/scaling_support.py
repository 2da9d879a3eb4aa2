"""What the scaling benchmarks share: the sizes, the figures, the goal lines, and a project
with one ``worker`` agent (tools: Read) and a runtime over it. Not a benchmark itself."""

from __future__ import annotations

import os
from pathlib import Path

from membrane.agents.catalog import Catalog
from membrane.config.values import Settings
from membrane.runtime import InProcessProvider, RuntimeOptions, SubagentRuntime
from membrane.store import MemoryStore, SQLiteStore
from membrane.testing import FunctionModel
from membrane.tools.registry import ToolRegistry
from membrane.tools.spec import Tool, ToolContext

__all__ = ["SCALE", "goal", "runtime_for", "show", "sizes"]

SCALE = float(os.environ.get("SIZES_SCALE", "1"))


def sizes(*values: int) -> list[int]:
    """``values`` scaled by ``SIZES_SCALE`` (at least 10 each), distinct and in order: each
    size's files and sessions are named by it."""
    return sorted({max(10, int(v * SCALE)) for v in values})


def show(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.2f} µs"


def goal(what: str, target: str, measured: str, met: bool) -> None:
    """Print one goal line as soon as it is measured (flushed: a run stopped part-way still
    shows what it measured)."""
    line = f"goal {what}: {target}, measured {measured} ({'met' if met else 'missed'})"
    print(line, flush=True)


async def _read(arguments: object, context: ToolContext) -> str:
    return "text"


def runtime_for(
    folder: Path, model: FunctionModel, *, store: MemoryStore | SQLiteStore, concurrency: int
) -> SubagentRuntime:
    agents = folder / ".membrane" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "worker.md").write_text(
        "---\nname: worker\ndescription: Reads files.\ntools: Read\n---\nRead and report.\n"
    )
    registry = ToolRegistry()
    registry.register(
        Tool(name="Read", description="Read", input_schema={"type": "object"}, handler=_read)
    )
    # No sweeps while counting: the sweeper renews leases on a timer.
    settings = Settings(
        max_concurrency=concurrency, lease_seconds=3600.0, sweep_interval_seconds=3600.0
    )
    (folder / "home").mkdir(exist_ok=True)
    catalog = Catalog(project=folder, home=folder / "home", settings=settings)
    return SubagentRuntime(
        catalog=catalog,
        registry=registry,
        provider=InProcessProvider(model),
        store=store,
        options=RuntimeOptions(settings=settings),
    )
