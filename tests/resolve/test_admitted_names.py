"""A definition's restriction names what it admits in one call (``admitted_names``): exactly
the registry's tools ``admits`` accepts, found from a per-version index of names by extension,
so a fresh scope asks about the candidates only, not about every registered tool."""

from __future__ import annotations

import sys
from types import FrameType

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from resolve_support import builtins, tool, tool_fields

from membrane.agents.definition import AgentDefinition
from membrane.config.values import Settings
from membrane.resolve import CallParams, Deployment, ParentContext, resolve
from membrane.tools.registry import ToolRegistry
from membrane.tools.restriction import NamedAdmission
from membrane.tools.scope import Scope
from membrane.tools.view import ToolView

_TOKENS = st.sampled_from(
    ["Read", "bash", "EDIT", "*", "inherit", "ext:alpha", "ext:alpha/search", "ext:beta",
     "mcp__gh__*", "mcp__gh__pull", "ext:gh/push", "Skill", "Task", "lookup", "nonsense"]
)  # fmt: skip
_POOL = [
    ("search", "extension:alpha"),
    ("fetch", "extension:alpha"),
    ("index", "extension:beta"),
    ("mcp__gh__pull", "mcp:gh"),
    ("mcp__gh__push", "mcp:gh"),
    ("mcp__gh__stray", "host"),  # an MCP-style name under another origin
    ("lookup", "host"),
    ("Task", "builtin"),
    ("TaskWait", "builtin"),
    ("read", "host"),  # not the builtin: a host tool of a builtin's name in other case
    ("WebFetch", "builtin"),
]
_GLOBALS = st.lists(st.tuples(st.sampled_from(_POOL), st.booleans()), max_size=10)


def _registry(extra: list[tuple[tuple[str, str], bool]]) -> ToolRegistry:
    registry = ToolRegistry()
    for item in builtins().values():
        registry.register(item)
    for (name, origin), mutating in extra:
        registry.register(tool(name, origin, mutating=mutating), replace=True)
    return registry


@settings(max_examples=200, deadline=None)
@given(
    extra=_GLOBALS,
    tools=st.one_of(st.none(), st.lists(_TOKENS, max_size=5)),
    disallowed=st.lists(_TOKENS, max_size=3),
    extensions=st.sampled_from([None, True, False, ("alpha",), ("*",), ("gh", "beta")]),
    excluded=st.lists(st.sampled_from(["alpha", "beta", "gh"]), max_size=2),
    isolated=st.booleans(),
    subagents=st.booleans(),
    plan=st.booleans(),
    parent_extra=st.lists(st.sampled_from(_POOL), max_size=4),
)
# A server's tool selected as ext:SERVER/TOOL (named mcp__SERVER__TOOL), and an inheriting
# child given a host tool by its parent.
@example(
    extra=[(("mcp__gh__push", "mcp:gh"), False)],
    tools=["ext:gh/push"],
    disallowed=[],
    extensions=None,
    excluded=[],
    isolated=False,
    subagents=False,
    plan=False,
    parent_extra=[],
)
@example(
    extra=[(("lookup", "host"), False), (("search", "extension:alpha"), True)],
    tools=["inherit"],
    disallowed=[],
    extensions=None,
    excluded=[],
    isolated=False,
    subagents=True,
    plan=True,
    parent_extra=[("lookup", "host"), ("search", "extension:alpha")],
)
def test_admitted_names_are_exactly_what_admits_accepts(
    extra: list[tuple[tuple[str, str], bool]],
    tools: list[str] | None,
    disallowed: list[str],
    extensions: object,
    excluded: list[str],
    isolated: bool,
    subagents: bool,
    plan: bool,
    parent_extra: list[tuple[str, str]],
) -> None:
    fields = tool_fields(tools, disallowed, extensions, excluded, subagents)
    if plan:
        fields["permission"] = "plan"
    definition = AgentDefinition(name="w", root="project", isolated=isolated, **fields)  # type: ignore[arg-type]
    registry = _registry(extra)
    deploy = Deployment(
        settings=Settings(),
        registry_tools=dict(registry.tools()),
        extensions={
            "alpha": frozenset({"search", "fetch"}),
            "beta": frozenset({"index"}),
            "gh": frozenset({"mcp__gh__pull", "mcp__gh__push"}),
        },
    )
    parent_tools = {**builtins(), **{name: tool(name, origin) for name, origin in parent_extra}}
    authority = resolve(definition, CallParams(), ParentContext(tools=parent_tools), deploy)
    restriction = authority.restriction
    assert isinstance(restriction, NamedAdmission)
    expected = {name for name, item in registry.tools().items() if restriction.admits(item)}
    assert restriction.admitted_names(registry) == expected
    scope = Scope(registry, name="w")
    scope.restrict(restriction, validate=False)
    assert set(scope.view().names) == expected


def _reason_calls(unselected: int) -> int:
    registry = _registry([])
    for i in range(unselected):
        registry.register(tool(f"other_{i:04d}", "extension:other"))
    registry.register(tool("search", "extension:alpha"))
    deploy = Deployment(
        settings=Settings(),
        registry_tools=dict(registry.tools()),
        extensions={"alpha": frozenset({"search"}), "other": frozenset()},
    )
    definition = AgentDefinition(name="w", root="project", tools=("Read", "ext:alpha"))
    restriction = resolve(definition, CallParams(), ParentContext(), deploy).restriction
    first = Scope(registry, name="first")
    first.restrict(restriction, validate=False)
    first.view()  # builds the registry's index for this version
    scope = Scope(registry, name="w")
    # A restriction of its own: one already asked keeps its answer for the registry's version.
    scope.restrict(
        resolve(definition, CallParams(), ParentContext(), deploy).restriction, validate=False
    )
    view, asked = _counting_reasons(scope)
    assert view.names == ("Read", "search")
    return asked


def _counting_reasons(scope: Scope) -> tuple[ToolView, int]:
    """``scope.view()`` and how many times a restriction was asked ``reason`` for it."""
    asked = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal asked
        if event == "call" and frame.f_code.co_name == "reason":
            asked += 1

    sys.setprofile(profile)
    try:
        view = scope.view()
    finally:
        sys.setprofile(None)
    return view, asked


@pytest.mark.costs
def test_a_fresh_scope_asks_about_candidates_only_whatever_the_registry_holds() -> None:
    assert _reason_calls(10) == _reason_calls(1_000) > 0


@pytest.mark.costs
def test_the_children_of_one_resolution_share_its_answer_until_the_registry_changes() -> None:
    registry = _registry([])
    registry.register(tool("search", "extension:alpha"))
    deploy = Deployment(
        settings=Settings(),
        registry_tools=dict(registry.tools()),
        extensions={"alpha": frozenset({"search"})},
    )
    definition = AgentDefinition(name="w", root="project", tools=("Read", "ext:alpha"))
    restriction = resolve(definition, CallParams(), ParentContext(), deploy).restriction

    def child() -> Scope:
        scope = Scope(registry, name="child")
        scope.restrict(restriction, validate=False)
        return scope

    view, asked = _counting_reasons(child())
    assert view.names == ("Read", "search") and asked > 0
    view, asked = _counting_reasons(child())
    assert view.names == ("Read", "search") and asked == 0
    registry.register(tool("lookup", "extension:alpha"))
    view, asked = _counting_reasons(child())
    assert view.names == ("Read", "lookup", "search") and asked > 0
