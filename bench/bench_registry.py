"""Tool resolution: Membrane's incremental ToolView against pydantic-ai's per-step filtering.

For 100, 1,000 and 10,000 global tools, with 3 restrictions and 10 scope-local tools, measure:

* cold resolution: a freshly configured scope's first ``view()`` plus its wire ``schemas()``;
* repeated resolution of an unchanged view (``scope.view()``);
* the per-call visibility check (``name in view.visible``, the built-in set ``ToolView.call``
  checks first);
* resolution right after one hot registration (``scope.view()`` plus ``schemas()``).

The peer, side by side in the same process: pydantic-ai's ``FilteredToolset`` over a
``CombinedToolset`` of the same tools (one ``FunctionToolset`` per origin), combined with the
local tools. It has no cache, so its per-step ``get_tools`` is what every step, cold or hot, costs.
Goals at 10,000 tools: unchanged >= 1,000,000x, cold >= 100x, hot >= 100x faster than a peer
step, and the per-call check at least as fast as the peer's dict lookup.

The per-call check is timed the same way on both sides: one hit and one miss per round, with the
same two key objects (fresh strings, as a name decoded from a model's reply is), by ``timeit``'s
own loop (no Python call around the check), in trials that alternate between the two sides; each
side's figure is its fastest trial, so a burst of load on the machine decides neither.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import timeit
from collections.abc import Callable, Mapping
from typing import Any

from pydantic_ai import Tool as PeerTool
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import CombinedToolset, FilteredToolset, FunctionToolset
from pydantic_ai.usage import RunUsage

from membrane import Restriction, Scope, Tool, ToolContext, ToolRegistry
from membrane.agents.definition import AgentDefinition
from membrane.config.values import Settings
from membrane.resolve import CallParams, Deployment, ParentContext, resolve
from membrane.tools.restriction import ToolPredicate

SIZES = (100, 1_000, 10_000)
LOCAL_TOOLS = 10
ORIGINS = ("builtin", "extension:alpha", "extension:beta", "mcp:docs")
GOALS = {"cold": 100, "unchanged": 1_000_000, "hot": 100, "check": 1}


def schema_for(index: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": f"Path for tool {index}."},
            "limit": {"type": "integer", "minimum": 0},
            "mode": {"enum": ["fast", "slow"]},
        },
        "required": ["path"],
    }


async def handler(arguments: Mapping[str, Any], context: ToolContext) -> str:
    return "ok"


def peer_function(path: str, limit: int = 0, mode: str = "fast") -> str:
    return "ok"


def global_names(size: int) -> list[str]:
    return [f"tool_{index:05d}" for index in range(size)]


def restrictions(names: list[str]) -> list[Restriction]:
    """A toolFilter deny-list, a definition allow-list (9 in 10 tools) and a role deny-list."""
    hot = [f"hot_{index:05d}" for index in range(2_000)]
    return [
        Restriction(deny=names[1::97][:10], label="toolFilter"),
        Restriction(allow=[*names[: len(names) * 9 // 10], *hot], label="definition"),
        Restriction(deny=names[2::89][:5], label="role:worker"),
    ]


CHECK_TRIALS = 15
CHECK_LOOPS = 2_000
#: One round: a hit and a miss, unrolled so the loop's own cost is spread over 50 checks.
CHECK_ROUND = "hit in seen; miss in seen; " * 25
#: The same through the scope, re-resolving (finding unchanged) its view before each check.
CHECK_VIEW_ROUND = "hit in scope.view().visible; miss in scope.view().visible; " * 25


def fresh(name: str) -> str:
    """An equal string that is not the same object (nor hashed yet), like a decoded name."""
    return "".join(list(name))


def checks(sides: Mapping[str, tuple[str, object]], hit: str, miss: str) -> dict[str, float]:
    """Seconds per check for each side (its round and what ``seen`` or ``scope`` is there):
    the fastest of trials that alternate the order of the sides."""
    timers = {
        side: timeit.Timer(
            statement,
            "seen = scope = held; hit, miss = keys",
            globals={"held": held, "keys": (hit, miss)},
        )
        for side, (statement, held) in sides.items()
    }
    best = dict.fromkeys(timers, float("inf"))
    for trial in range(CHECK_TRIALS):
        order = list(timers) if trial % 2 == 0 else list(reversed(timers))
        for side in order:
            spent = timers[side].timeit(CHECK_LOOPS) / (CHECK_LOOPS * 50)
            best[side] = min(best[side], spent)
    return best


def timed(action: Callable[[], object], repeat: int) -> float:
    """Median seconds per call over ``repeat`` calls (batched when calls are very fast)."""
    batch = max(1, repeat // 50)
    samples = []
    for _ in range(max(1, repeat // batch)):
        start = time.perf_counter()
        for _ in range(batch):
            action()
        samples.append((time.perf_counter() - start) / batch)
    return statistics.median(samples)


def build_membrane(size: int) -> tuple[ToolRegistry, list[Restriction], list[Tool]]:
    registry = ToolRegistry()
    for index, name in enumerate(global_names(size)):
        origin = ORIGINS[index % len(ORIGINS)]
        registry.register(Tool(name, f"Tool {index}.", schema_for(index), handler, origin=origin))
    local = [
        Tool(f"local_{index}", f"Local {index}.", schema_for(index), handler)
        for index in range(LOCAL_TOOLS)
    ]
    return registry, restrictions(global_names(size)), local


def definition_restriction(registry: ToolRegistry) -> ToolPredicate:
    """The restriction the runtime installs for a definition that selects one extension
    (``tools: [Read, ext:alpha]``), resolved as for a child of a parent holding every tool."""
    tools = dict(registry.tools())
    alpha = frozenset(name for name, tool in tools.items() if tool.origin == "extension:alpha")
    deployment = Deployment(settings=Settings(), registry_tools=tools, extensions={"alpha": alpha})
    definition = AgentDefinition(
        name="worker", root="project", tools=("Read", "ext:alpha"), extensions=("alpha",)
    )
    parent = ParentContext(tools=tools)
    return resolve(definition, CallParams(), parent, deployment).restriction


def configured_scope(
    registry: ToolRegistry, installed: list[ToolPredicate], local: list[Tool]
) -> Scope:
    scope = Scope(registry, name="child")
    for restriction in installed:
        scope.restrict(restriction, validate=False)
    for tool in local:
        scope.add_local(tool)
    return scope


def measure_membrane(size: int) -> tuple[dict[str, float], Scope]:
    registry, installed, local = build_membrane(size)
    heavy = size >= 10_000

    def cold() -> None:
        configured_scope(registry, installed, local).view().schemas()

    first_scope = configured_scope(registry, installed, local)
    start = time.perf_counter()
    first_scope.view().schemas()
    first = time.perf_counter() - start  # every tool's wire entry is rendered for the first time
    figures = {"first": first, "cold": timed(cold, 20 if heavy else 100)}
    # The same through the restriction a child's definition installs (one extension of four).
    chosen = [definition_restriction(registry)]
    configured_scope(registry, chosen, local).view().schemas()  # the registry's index, once

    def cold_definition() -> None:
        configured_scope(registry, chosen, local).view().schemas()

    figures["definition"] = timed(cold_definition, 20 if heavy else 100)

    scope = configured_scope(registry, installed, local)
    scope.view().schemas()
    figures["unchanged"] = timed(scope.view, 20_000)
    view = scope.view()

    counter = iter(range(2_000))
    hot_samples, register_samples = [], []
    for _ in range(200):
        name = f"hot_{next(counter):05d}"
        tool = Tool(name, "Hot.", schema_for(0), handler)
        start = time.perf_counter()
        registry.register(tool)
        register_samples.append(time.perf_counter() - start)
        start = time.perf_counter()
        view = scope.view()
        view.schemas()
        hot_samples.append(time.perf_counter() - start)
        assert name in view
    figures["hot"] = statistics.median(hot_samples)
    figures["register"] = statistics.median(register_samples)
    return figures, scope


def measure_peer(size: int) -> tuple[dict[str, float], dict[str, object]]:
    names = global_names(size)
    installed = restrictions(names)
    groups = [FunctionToolset[None]() for _ in ORIGINS]
    for index, name in enumerate(names):
        groups[index % len(ORIGINS)].add_tool(
            PeerTool.from_schema(peer_function, name, f"Tool {index}.", schema_for(index))
        )
    local = FunctionToolset[None](
        [
            PeerTool.from_schema(peer_function, f"local_{i}", f"Local {i}.", schema_for(i))
            for i in range(LOCAL_TOOLS)
        ]
    )

    def admits(ctx: RunContext[None], tool_def: ToolDefinition) -> bool:
        return all(
            (r.allow is None or tool_def.name in r.allow) and tool_def.name not in r.deny
            for r in installed
        )

    toolset = CombinedToolset([FilteredToolset(CombinedToolset(groups), admits), local])
    ctx = RunContext[None](deps=None, model=TestModel(), usage=RunUsage())
    loop = asyncio.new_event_loop()
    try:
        tools = loop.run_until_complete(toolset.get_tools(ctx))
        step = timed(
            lambda: loop.run_until_complete(toolset.get_tools(ctx)), 5 if size >= 10_000 else 30
        )
    finally:
        loop.close()
    return {"step": step}, tools


def show(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:9.2f} ms"
    if seconds < 1e-7:
        return f"{seconds * 1e9:9.2f} ns"
    return f"{seconds * 1e6:9.2f} µs"


def main() -> None:
    print("Tool resolution: 3 restrictions, 10 local tools; median per operation")
    print(f"{'tools':>6}  {'measure':<34}{'membrane':>13}{'pydantic-ai':>14}{'ratio':>12}")
    verdicts = []
    for size in SIZES:
        ours, scope = measure_membrane(size)
        peer, peer_tools = measure_peer(size)
        step = peer["step"]
        # The same two key objects on both sides: a hit (an equal fresh string) and a miss.
        hit, miss = fresh(global_names(size)[size // 2]), fresh("tool_absent")
        view = scope.view()
        assert hit in view and hit in peer_tools
        assert miss not in view and miss not in peer_tools
        sides = {
            "membrane": (CHECK_ROUND, view.visible),
            "membrane+view": (CHECK_VIEW_ROUND, scope),
            "peer": (CHECK_ROUND, peer_tools),
        }
        timing = checks(sides, hit, miss)
        ours["check"], ours["check+view"] = timing["membrane"], timing["membrane+view"]
        peer["check"] = timing["peer"]
        rows: list[tuple[str, float, float | None, str | None]] = [
            ("cold resolution (+schemas)", ours["cold"], step, "cold"),
            ("first resolution, no wire dicts yet", ours["first"], step, None),
            ("  cold, a definition's restriction", ours["definition"], step, None),
            ("unchanged view", ours["unchanged"], step, "unchanged"),
            ("per-call visibility check", ours["check"], peer["check"], "check"),
            ("  the same, re-resolving the view", ours["check+view"], peer["check"], None),
            ("after one hot registration", ours["hot"], step, "hot"),
            ("  the registration itself", ours["register"], None, None),
        ]
        for label, mine, theirs, goal in rows:
            if theirs is None:
                print(f"{size:>6}  {label:<34}{show(mine):>13}{'':>14}{'':>12}")
                continue
            ratio = theirs / mine
            shown = f"{ratio:,.0f}x" if ratio >= 10 else f"{ratio:.2f}x"
            print(f"{size:>6}  {label:<34}{show(mine):>13}{show(theirs):>14}{shown:>12}")
            if goal and size == SIZES[-1]:
                verdicts.append((label, ratio, GOALS[goal]))
    print()
    for label, ratio, goal in verdicts:
        state = "met" if ratio >= goal else "missed"
        print(
            f"goal {label} at {SIZES[-1]:,} tools: >= {goal:,}x, measured {ratio:,.2f}x ({state})"
        )


if __name__ == "__main__":
    main()
