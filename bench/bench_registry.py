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
step, and the per-call check at least as fast as the peer's dict lookup. The unchanged line
compares a cache hit (Membrane finds its view unchanged by comparing versions) with the peer's
full recompute (it has no cache), and its label says so: it measures the cache, not the
resolution, which the cold and hot lines measure.

The per-call check is timed the same way on both sides, with the same key objects: 128 names
both sides hold, spread evenly over them, and 128 names neither holds, each a fresh string (equal
to a held name but not the same object, as a name decoded from a model's reply is). One key
decides little: where its hash lands in a table (so how far it probes) is a matter of the
process's hash seed, on each side independently; over 128 keys of each kind that evens out. Hits
and misses are timed apart (a round that alternates them lets the branch predictor learn the
sequence, which moved the ratio by several percent from one process to the next), each round
unrolled (no Python call or loop around a check, only ``timeit``'s own), in trials that alternate
between the sides, in the thread's CPU time (time the thread spends descheduled counts for
neither); each side's figure for a kind is its fastest trial, so a burst of load decides neither,
and a check is the mean of a hit and a miss.
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


CHECK_TRIALS = 41
#: Keys of each kind (held by both sides, held by neither) in a round.
CHECK_KEYS = 128
CHECK_LOOPS = 100
#: One round: every key of one kind once, unrolled (``k0`` ... are the round's keys).
CHECK_ROUND = "; ".join(f"k{index} in seen" for index in range(CHECK_KEYS))
#: The same through the scope, re-resolving (finding unchanged) its view before each check.
CHECK_VIEW_ROUND = "; ".join(f"k{index} in scope.view().visible" for index in range(CHECK_KEYS))
CHECK_SETUP = f"seen = scope = held; {', '.join(f'k{i}' for i in range(CHECK_KEYS))}, = keys"


def fresh(name: str) -> str:
    """An equal string that is not the same object (nor hashed yet), like a decoded name."""
    return "".join(list(name))


def check_keys(held: list[frozenset[str]]) -> dict[str, list[str]]:
    """The keys of the per-call check, the same objects for every side: ``CHECK_KEYS`` names
    every set in ``held`` has, evenly spread over them in name order (some twice when fewer are
    held), and as many that none has."""
    common = sorted(frozenset.intersection(*held))
    step = len(common) / CHECK_KEYS
    hits = [fresh(common[int(step * (index + 0.5))]) for index in range(CHECK_KEYS)]
    misses = [fresh(f"absent_{index:05d}") for index in range(CHECK_KEYS)]
    assert all(hit in names for hit in hits for names in held)
    assert not any(miss in names for miss in misses for names in held)
    return {"hit": hits, "miss": misses}


def checks(
    sides: Mapping[str, tuple[str, object]], keys: Mapping[str, list[str]]
) -> dict[str, dict[str, float]]:
    """CPU seconds per check for each side (its round and what ``seen`` or ``scope`` is there)
    and each kind of key: the fastest of trials that alternate the order of the sides."""
    timers = {
        (side, kind): timeit.Timer(
            statement,
            CHECK_SETUP,
            timer=time.thread_time,
            globals={"held": held, "keys": keys[kind]},
        )
        for kind in keys
        for side, (statement, held) in sides.items()
    }
    best = dict.fromkeys(timers, float("inf"))
    for trial in range(CHECK_TRIALS):
        for kind in keys:
            order = list(sides) if trial % 2 == 0 else list(reversed(sides))
            for side in order:
                spent = timers[side, kind].timeit(CHECK_LOOPS) / (CHECK_LOOPS * CHECK_KEYS)
                best[side, kind] = min(best[side, kind], spent)
    return {side: {kind: best[side, kind] for kind in keys} for side in sides}


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
        # The same key objects on both sides: names both hold, and names neither holds.
        view = scope.view()
        keys = check_keys([view.visible, frozenset(peer_tools)])
        sides = {
            "membrane": (CHECK_ROUND, view.visible),
            "membrane+view": (CHECK_VIEW_ROUND, scope),
            "peer": (CHECK_ROUND, peer_tools),
        }
        timing = checks(sides, keys)
        # A check is the mean of a hit and a miss.
        ours["check"] = statistics.fmean(timing["membrane"].values())
        ours["check+view"] = statistics.fmean(timing["membrane+view"].values())
        peer["check"] = statistics.fmean(timing["peer"].values())
        for kind in keys:
            ours[kind], peer[kind] = timing["membrane"][kind], timing["peer"][kind]
        rows: list[tuple[str, float, float | None, str | None]] = [
            ("cold resolution (+schemas)", ours["cold"], step, "cold"),
            ("first resolution, no wire dicts yet", ours["first"], step, None),
            ("  cold, a definition's restriction", ours["definition"], step, None),
            ("unchanged view (cache hit vs peer recompute)", ours["unchanged"], step, "unchanged"),
            ("per-call visibility check", ours["check"], peer["check"], "check"),
            ("  of it, a name in the view", ours["hit"], peer["hit"], None),
            ("  of it, a name outside it", ours["miss"], peer["miss"], None),
            ("  the same, re-resolving the view", ours["check+view"], peer["check"], None),
            ("after one hot registration", ours["hot"], step, "hot"),
            ("  the registration itself", ours["register"], None, None),
        ]
        for label, mine, theirs, goal in rows:
            if theirs is None:
                print(f"{size:>6}  {label:<46}{show(mine):>13}{'':>14}{'':>12}")
                continue
            ratio = theirs / mine
            shown = f"{ratio:,.0f}x" if ratio >= 10 else f"{ratio:.2f}x"
            print(f"{size:>6}  {label:<46}{show(mine):>13}{show(theirs):>14}{shown:>12}")
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
