"""Property tests: over random registries, filters, gates, local tools and hot changes, the view
is the set formula, and schemas, lookup, execution and the Code Mode SDK agree on it."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrane import Restriction, Scope, Tool, ToolContext, ToolRegistry, ToolView
from membrane.errors import ToolNotVisible, ToolSpecError
from membrane.lowlevel import ToolPredicate

POOL = ["Read", "Glob", "Grep", "Bash", "Edit", "search", "fetch", "web-search", "a.b", "Task"]
RESERVED_POOL = ["run_code", "run_sql"]
ORIGINS = ["builtin", "extension:alpha", "extension:beta"]
NEVER = ["read", "Nope", "run-code", ""]


class OriginPredicate:
    """A live, non-name predicate: admits tools of a mutable set of origins."""

    def __init__(self, origins: set[str]) -> None:
        self.label = "definition"
        self.origins = origins

    def admits(self, tool: Tool) -> bool:
        return tool.origin in self.origins

    def stamp(self) -> Hashable:
        return frozenset(self.origins)


@dataclass(frozen=True)
class Global:
    name: str
    origin: str
    reserved: bool


def _tool(spec: Global, *, version: int = 0) -> Tool:
    async def handler(arguments: Mapping[str, Any], context: ToolContext) -> str:
        return spec.name

    return Tool(
        spec.name,
        f"{spec.name} v{version}",
        {"type": "object"},
        handler,
        origin=spec.origin,
        reserved=spec.reserved,
    )


names = st.sampled_from(POOL)
globals_ = st.builds(Global, names, st.sampled_from(ORIGINS), st.just(False))
#: Reserved tools are scope-local: the registry refuses a reserved global one.
reserved_globals = st.builds(
    Global, st.sampled_from([*POOL, *RESERVED_POOL]), st.sampled_from(ORIGINS), st.just(True)
)
name_sets = st.frozensets(names, max_size=6)
restrictions = st.one_of(
    st.builds(
        lambda allow, deny: Restriction(allow=allow, deny=deny),
        st.none() | name_sets,
        name_sets,
    ).filter(lambda r: r.allow is not None or bool(r.deny)),
    st.frozensets(st.sampled_from(ORIGINS), max_size=3).map(lambda s: OriginPredicate(set(s))),
)
changes = st.lists(
    st.one_of(
        st.tuples(st.just("register"), globals_),
        st.tuples(st.just("register-reserved"), reserved_globals),
        st.tuples(st.just("remove"), names),
        st.tuples(st.just("local"), names),
        st.tuples(st.just("reserved"), st.sampled_from(RESERVED_POOL)),
        st.tuples(st.just("flip"), st.sampled_from(ORIGINS)),
        st.tuples(st.just("flip-gate"), st.sampled_from([*ORIGINS, "scope"])),
        st.tuples(st.just("check"), st.none()),
    ),
    max_size=25,
)


def _admits(predicate: ToolPredicate, tool: Tool) -> bool:
    if isinstance(predicate, Restriction):
        return (predicate.allow is None or tool.name in predicate.allow) and (
            tool.name not in predicate.deny
        )
    assert isinstance(predicate, OriginPredicate)
    return tool.origin in predicate.origins


def expected_tools(scope: Scope) -> dict[str, Tool]:
    """The set formula of seed 001, written out independently of the resolver."""
    visible = {
        name: tool
        for name, tool in scope.registry.tools().items()
        if all(_admits(p, tool) for p in scope.restrictions)
    }
    visible.update(scope.locals())
    # A gate shuts global and local tools alike (a shut local hides the global it shadows);
    # reserved tools are outside it.
    visible = {
        name: tool
        for name, tool in visible.items()
        if all(_admits(gate, tool) for gate in scope.gates)
    }
    visible.update(scope.reserved())
    return visible


def check(scope: Scope, make_fresh: Callable[[], Scope]) -> None:
    view = scope.view()
    expected = expected_tools(scope)
    assert view.names == tuple(sorted(expected))
    for name, tool in expected.items():
        assert name in view
        assert view.get(name) is tool
    assert [entry["name"] for entry in view.schemas()] == list(view.names)
    assert [entry["function"]["name"] for entry in view.openai_tools()] == list(view.names)
    namespace: dict[str, Any] = {}
    exec(compile(view.code_sdk(), "<sdk>", "exec"), namespace)
    assert sorted(namespace["TOOLS"].values()) == list(view.names)
    assert make_fresh().view().names == view.names
    hidden = [name for name in [*POOL, *RESERVED_POOL, *NEVER] if name not in expected]
    anyio.run(_calls_agree, view, list(view.names), hidden)


async def _calls_agree(view: ToolView, visible: list[str], hidden: list[str]) -> None:
    for name in visible:
        assert await view.call(name, {}, ToolContext()) == name
    for name in hidden:
        assert name not in view
        try:
            await view.call(name, {}, ToolContext())
        except ToolNotVisible as error:
            assert error.data == {"name": name}
        else:
            raise AssertionError(f"{name!r} ran although it is not visible")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    initial=st.lists(globals_, max_size=10),
    installed=st.lists(restrictions, max_size=3),
    local=st.frozensets(names, max_size=3),
    gate=st.none() | st.frozensets(st.sampled_from([*ORIGINS, "scope"]), max_size=4),
    steps=changes,
)
def test_view_is_the_set_formula_through_hot_changes(
    initial: list[Global],
    installed: list[ToolPredicate],
    local: frozenset[str],
    gate: frozenset[str] | None,
    steps: list[tuple[str, Any]],
) -> None:
    registry = ToolRegistry()
    for spec in initial:
        registry.register(_tool(spec), replace=True)
    scope = Scope(registry, name="child")
    for predicate in installed:
        scope.restrict(predicate, validate=False)
    for name in sorted(local):
        scope.add_local(_tool(Global(name, "scope", False), version=1))
    phase = None if gate is None else OriginPredicate(set(gate))
    if phase is not None:
        scope.gate(phase)

    def make_fresh() -> Scope:
        fresh = Scope(registry, name="fresh")
        for predicate in scope.restrictions:
            fresh.restrict(predicate, validate=False)
        for predicate in scope.gates:
            fresh.gate(predicate)
        for tool in scope.locals().values():
            fresh.add_local(tool)
        for tool in scope.reserved().values():
            fresh.add_reserved(tool)
        return fresh

    check(scope, make_fresh)
    for version, (kind, value) in enumerate(steps, start=2):
        if kind == "register":
            registry.register(_tool(value, version=version), replace=True)
        elif kind == "register-reserved":
            before = registry.version
            try:
                registry.register(_tool(value, version=version), replace=True)
            except ToolSpecError as error:
                assert error.code == "tool-spec-invalid"
            else:
                raise AssertionError(f"a reserved global {value.name!r} was registered")
            assert registry.version == before
        elif kind == "remove" and value in registry:
            registry.remove(value)
        elif kind == "local":
            if value in scope.locals():
                scope.remove_local(value)
            else:
                scope.add_local(_tool(Global(value, "scope", False), version=version))
        elif kind == "reserved":
            if value in scope.reserved():
                scope.remove_reserved(value)
            else:
                scope.add_reserved(_tool(Global(value, "scope", True), version=version))
        elif kind == "flip":
            for predicate in scope.restrictions:
                if isinstance(predicate, OriginPredicate):
                    predicate.origins ^= {value}
        elif kind == "flip-gate":
            if phase is not None:
                phase.origins ^= {value}
        else:
            check(scope, make_fresh)
    check(scope, make_fresh)
