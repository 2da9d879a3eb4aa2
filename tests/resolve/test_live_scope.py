"""The restriction is live, and the scope's view is the one explain shows."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from resolve_support import agent, assert_complete, builtins, deployment, tool, tool_fields

from membrane.agents.definition import AgentDefinition
from membrane.config.values import Settings
from membrane.errors import ToolNotVisible
from membrane.resolve import (
    LEFT_OUT_REASONS,
    CallParams,
    Deployment,
    ParentContext,
    resolve,
)
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext
from membrane.vocabulary import INHERIT_DENY_TOOLS, canonical_builtin_name


def _registry_with_builtins() -> ToolRegistry:
    registry = ToolRegistry()
    for item in builtins().values():
        registry.register(item)
    return registry


def _deployment_of(registry: ToolRegistry, extensions: Mapping[str, frozenset[str]]) -> Deployment:
    return Deployment(
        settings=Settings(), registry_tools=dict(registry.tools()), extensions=extensions
    )


@pytest.mark.anyio
async def test_visibility_is_not_permission_for_a_late_out_of_scope_tool() -> None:
    # Seed 003 microcheck: alpha registers search and write_remote during start-up; the agent
    # selects only ext:alpha/search. Neither the first turn's view nor execution admits
    # write_remote, although it did not exist when the child was resolved.
    registry = _registry_with_builtins()
    authority = resolve(
        agent(tools=["Read", "ext:alpha/search"]),
        CallParams(),
        ParentContext(tools=registry.tools()),
        _deployment_of(registry, {"alpha": frozenset()}),
    )
    scope = Scope(registry, name="child")
    scope.restrict(authority.restriction)
    alpha = registry.extension("alpha")
    alpha.register_tool(tool("search"))
    alpha.register_tool(tool("write_remote", mutating=True))
    view = scope.view()
    assert view.names == ("Read", "search")
    with pytest.raises(ToolNotVisible):
        await view.call("write_remote", {}, ToolContext(agent="worker"))
    assert await view.call("search", {}, ToolContext(agent="worker")) == "ok"
    assert authority.restriction.reason(registry.tools()["write_remote"]) == "not selected"


def test_the_scope_view_equals_the_callable_global_tools() -> None:
    registry = _registry_with_builtins()
    alpha = registry.extension("alpha")
    for name in ("search", "fetch"):
        alpha.register_tool(tool(name))
    registry.extension("beta").register_tool(tool("index"))
    definition = agent(tools=["Read", "Grep", "ext:alpha"], disallowed_tools=["grep"])
    authority = resolve(
        definition,
        CallParams(),
        ParentContext(tools=registry.tools()),
        _deployment_of(registry, {"alpha": frozenset({"search", "fetch"}), "beta": frozenset()}),
    )
    scope = Scope(registry, name="child")
    scope.restrict(authority.restriction)
    assert scope.view().names == authority.callable == ("Read", "fetch", "search")
    assert authority.left_out["index"] == "not selected"


def test_an_inheriting_child_admits_a_tool_the_parent_gains_later() -> None:
    registry = _registry_with_builtins()
    parent_catalog: dict[str, Tool] = dict(registry.tools())
    parent = ParentContext(
        tools=dict(parent_catalog),
        live=lambda: parent_catalog,
        live_stamp=lambda: frozenset(parent_catalog),
    )
    authority = resolve(
        agent(tools=["inherit"]), CallParams(), parent, _deployment_of(registry, {})
    )
    scope = Scope(registry, name="child")
    scope.restrict(authority.restriction)
    late = tool("mcp__docs__lookup", "mcp:docs", deferred=True)
    registry.register(late)
    assert "mcp__docs__lookup" not in scope.view()
    before = authority.restriction.stamp()
    parent_catalog[late.name] = late
    assert authority.restriction.stamp() != before
    assert "mcp__docs__lookup" in scope.view()
    deny_listed = tool("ToolSearch")
    registry.register(deny_listed)
    parent_catalog["ToolSearch"] = deny_listed
    assert "ToolSearch" not in scope.view()
    del parent_catalog[late.name]
    assert "mcp__docs__lookup" not in scope.view()


def test_a_tool_a_loaded_extension_registers_later_is_admitted_without_reresolving() -> None:
    registry = _registry_with_builtins()
    deploy = _deployment_of(registry, {"notes": frozenset()})
    authority = resolve(agent(extensions=["notes"]), CallParams(), ParentContext(), deploy)
    scope = Scope(registry, name="child")
    scope.restrict(authority.restriction)
    # A definition that writes neither ``extensions`` nor a selector asks for no extension
    # tool (DESIGN rule 2), now or later.
    silent = Scope(registry, name="silent")
    silent.restrict(resolve(agent(), CallParams(), ParentContext(), deploy).restriction)
    registry.extension("notes").register_tool(tool("annotate"))
    registry.extension("other").register_tool(tool("leak"))
    assert scope.view().names == ("Glob", "Grep", "Read", "annotate")
    assert silent.view().names == ("Glob", "Grep", "Read")


_HOST = [*sorted(INHERIT_DENY_TOOLS), "Skill", "WebFetch"]
_TOKENS = st.sampled_from(
    ["Read", "bash", "EDIT", "*", "all", "inherit", "ext:alpha", "ext:alpha/search",
     "ext:beta", "mcp__gh__*", "mcp__gh__pull", "Skill", "Task", "nonsense"]
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    tools=st.one_of(st.none(), st.lists(_TOKENS, max_size=5)),
    disallowed=st.lists(_TOKENS, max_size=3),
    extensions=st.sampled_from([None, True, False, ("alpha",), ("*",), ("gh", "beta")]),
    excluded=st.lists(st.sampled_from(["alpha", "beta", "gh"]), max_size=2),
    isolated=st.booleans(),
    subagents=st.booleans(),
    parent_depth=st.integers(0, 3),
    root=st.sampled_from(["project", "builtin"]),
    memory=st.sampled_from([None, "project", "user"]),
    parent_names=st.lists(st.sampled_from(_HOST), max_size=6),
)
def test_every_known_tool_is_callable_or_has_exactly_one_reason(
    tools: list[str] | None,
    disallowed: list[str],
    extensions: object,
    excluded: list[str],
    isolated: bool,
    subagents: bool,
    parent_depth: int,
    root: str,
    memory: str | None,
    parent_names: list[str],
) -> None:
    fields = tool_fields(tools, disallowed, extensions, excluded, subagents)
    if memory is not None:
        fields["memory"] = memory
    definition = AgentDefinition(name="w", root=root, isolated=isolated, **fields)  # type: ignore[arg-type]
    deploy = deployment(
        extensions={
            "alpha": {
                "search": tool("search", "extension:alpha"),
                "fetch": tool("fetch", "extension:alpha"),
            },
            "beta": {"index": tool("index", "extension:beta")},
            "gh": {"mcp__gh__pull": tool("mcp__gh__pull", "mcp:gh")},
        },
        settings=Settings(max_depth=2),
    )
    parent_tools = {
        **builtins(),
        **{n: tool(n) for n in parent_names},
        "mcp__jira__get": tool("mcp__jira__get", "mcp:jira", deferred=True),
    }
    authority = resolve(
        definition, CallParams(), ParentContext(tools=parent_tools, depth=parent_depth), deploy
    )
    assert_complete(authority, parent_tools, deploy.registry_tools)
    assert set(authority.left_out.values()) <= set(LEFT_OUT_REASONS)
    known = {**parent_tools, **deploy.registry_tools}
    for name in authority.callable:
        if name in known:
            assert authority.restriction.admits(known[name])
    for name, why in authority.left_out.items():
        if name in known:
            assert authority.restriction.reason(known[name]) == why
    for token in disallowed:
        assert (canonical_builtin_name(token) or token) not in authority.callable
    if not subagents or isolated:
        assert "Task" not in authority.callable
    if isolated:
        assert all(known.get(n) is None or known[n].origin == "builtin" for n in authority.callable)
        assert authority.extensions_loaded == ()
