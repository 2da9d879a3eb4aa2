"""Scopes: intersecting restrictions, local and reserved tools, live semantics and caching."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable

import pytest

from membrane import Restriction, Scope, Tool, ToolRegistry
from membrane.errors import ToolSpecError


@pytest.fixture
def registry(make_tool: Callable[..., Tool]) -> ToolRegistry:
    registry = ToolRegistry()
    for name in ("Read", "Glob", "Grep", "Bash", "Edit"):
        registry.register(make_tool(name))
    return registry


def test_several_restrictions_intersect(registry: ToolRegistry) -> None:
    scope = Scope(registry, name="child")
    scope.restrict(Restriction(allow=["Read", "Glob", "Bash"]))
    scope.restrict(Restriction(deny=["Bash"]), validate=False)
    scope.restrict(Restriction(allow=["Glob", "Read", "Edit"], label="role:reviewer"))
    assert scope.view().names == ("Glob", "Read")


def test_local_tool_shadows_an_admitted_global(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    scope = Scope(registry, name="child")
    scope.add_local(make_tool("Read", description="scoped read"))
    tool = scope.view().get("Read")
    assert tool.description == "scoped read"
    assert tool.origin == "scope"


def test_local_tools_are_added_after_filtering(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    scope = Scope(registry, name="child")
    scope.restrict(Restriction(allow=[]))
    scope.add_local(make_tool("report"))
    scope.add_local(make_tool("Bash", description="scoped bash"))
    assert scope.view().names == ("Bash", "report")


def test_reserved_tools_are_outside_every_filter(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    scope = Scope(registry, name="child")
    scope.restrict(Restriction(allow=[]))
    scope.add_reserved(make_tool("run_code"))
    view = scope.view()
    assert view.names == ("run_code",)
    assert view.get("run_code").reserved


def test_an_extension_cannot_slip_a_reserved_tool_past_a_child_filter(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    child = Scope(registry, name="child")
    child.restrict(Restriction(allow=[]))
    with pytest.raises(ToolSpecError):
        registry.extension("evil").register_tool(make_tool("notebook", reserved=True))
    registry.extension("evil").register_tool(make_tool("notebook"))
    assert "notebook" not in child.view()
    assert child.view().names == ()


def test_scopes_are_flat(registry: ToolRegistry, make_tool: Callable[..., Tool]) -> None:
    parent = Scope(registry, name="parent")
    parent.add_local(make_tool("parent_only"))
    child = Scope(registry, name="child")
    assert "parent_only" in parent.view()
    assert "parent_only" not in child.view()


def test_deny_only_filter_admits_later_tools(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    scope = Scope(registry, name="child")
    scope.restrict(Restriction(deny=["Bash"]), validate=False)
    scope.view()
    registry.register(make_tool("web_search"))
    registry.register(make_tool("Bash", description="v2"), replace=True)
    view = scope.view()
    assert "web_search" in view
    assert "Bash" not in view


def test_allow_list_excludes_later_tools_unless_it_names_them(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    scope = Scope(registry, name="child")
    scope.restrict(Restriction(allow=["Read", "Write"]), validate=False)
    assert scope.view().names == ("Read",)
    registry.register(make_tool("web_search"))
    registry.register(make_tool("Write"))
    assert scope.view().names == ("Read", "Write")


def test_removing_a_global_removes_it_from_every_view(registry: ToolRegistry) -> None:
    scopes = [Scope(registry, name=f"child{i}") for i in range(3)]
    scopes[1].restrict(Restriction(allow=["Read", "Grep"]))
    scopes[2].restrict(Restriction(deny=["Bash"]))
    for scope in scopes:
        assert "Read" in scope.view()
    registry.remove("Read")
    for scope in scopes:
        assert "Read" not in scope.view()


def test_replaced_global_is_seen_by_the_next_resolution(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    scope = Scope(registry, name="child")
    assert scope.view().get("Grep").description == "The Grep tool."
    registry.register(make_tool("Grep", description="v2"), replace=True)
    assert scope.view().get("Grep").description == "v2"


def test_unchanged_view_is_the_same_object(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    scope = Scope(registry, name="child")
    first = scope.view()
    assert scope.view() is first
    scope.add_local(make_tool("report"))
    assert scope.view() is not first


def test_change_to_a_filtered_out_tool_keeps_the_same_resolution(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    scope = Scope(registry, name="child")
    scope.restrict(Restriction(allow=["Read"]))
    first = scope.view()
    registry.register(make_tool("unrelated"))
    second = scope.view()
    assert second.names == first.names
    assert second.key != first.key


class OriginPredicate:
    """Admits tools of the given origins; the set may change, and the stamp with it."""

    def __init__(self, *origins: str) -> None:
        self.label = "definition"
        self.origins = set(origins)

    def admits(self, tool: Tool) -> bool:
        return tool.origin in self.origins

    def stamp(self) -> Hashable:
        return frozenset(self.origins)


def test_any_tool_predicate_can_restrict_a_scope(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    registry.extension("alpha").register_tool(make_tool("search"))
    registry.extension("beta").register_tool(make_tool("fetch"))
    predicate = OriginPredicate("extension:alpha")
    scope = Scope(registry, name="child")
    scope.restrict(predicate)
    assert scope.view().names == ("search",)
    registry.extension("alpha").register_tool(make_tool("write_remote"))
    assert scope.view().names == ("search", "write_remote")
    predicate.origins.add("builtin")
    assert "Read" in scope.view()


def test_non_predicate_is_refused(registry: ToolRegistry) -> None:
    with pytest.raises(ToolSpecError, match="ToolPredicate"):
        Scope(registry, name="child").restrict(["Read"])  # type: ignore[arg-type]


def test_local_and_reserved_names_do_not_collide(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    scope = Scope(registry, name="child")
    scope.add_reserved(make_tool("run_code"))
    with pytest.raises(ToolSpecError, match="'run_code'"):
        scope.add_local(make_tool("run_code"))
    scope.add_local(make_tool("report"))
    with pytest.raises(ToolSpecError, match="'report'"):
        scope.add_local(make_tool("report"))
    scope.add_local(make_tool("report", description="v2"), replace=True)
    assert scope.view().get("report").description == "v2"


def test_removing_local_tools(registry: ToolRegistry, make_tool: Callable[..., Tool]) -> None:
    scope = Scope(registry, name="child")
    scope.add_local(make_tool("report"))
    scope.remove_local("report")
    assert "report" not in scope.view()
    with pytest.raises(ToolSpecError, match="'report'"):
        scope.remove_local("report")
    with pytest.raises(ToolSpecError, match="'run_code'"):
        scope.remove_reserved("run_code")


def test_a_tool_whose_requirement_is_absent_is_in_no_view_until_it_is_provided(
    make_tool: Callable[..., Tool],
) -> None:
    registry = ToolRegistry()
    registry.register(make_tool("Read"))
    shot = dataclasses.replace(make_tool("screenshot"), requires=frozenset({"computer-use"}))
    registry.register(shot)
    heard: list[str] = []
    registry.requirements.subscribe(heard.append)
    scope = Scope(registry, name="child")
    scope.restrict(Restriction(deny=["Bash"]), validate=False)
    assert scope.view().names == ("Read",)
    registry.requirements.provide("computer-use")
    assert scope.view().names == ("Read", "screenshot")
    registry.requirements.withdraw("computer-use")
    assert scope.view().names == ("Read",)
    assert heard == ["computer-use", "computer-use"]
    # A later registration is checked the same way (the layer is brought forward).
    registry.register(dataclasses.replace(make_tool("click"), requires=frozenset({"computer-use"})))
    assert scope.view().names == ("Read",)


def test_requires_must_be_a_frozenset_of_names(make_tool: Callable[..., Tool]) -> None:
    bad = dataclasses.replace(make_tool("x"), requires=("computer-use",))  # type: ignore[arg-type]
    with pytest.raises(ToolSpecError):
        ToolRegistry().register(bad)


def test_a_shared_view_never_shows_one_scope_what_anothers_filters_hide(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    definition = Restriction(allow=["Read", "Grep", "Bash"], label="definition")
    plain, denied, equal, own = (Scope(registry, name=f"child-{i}") for i in range(4))
    for scope in (plain, denied, own):
        scope.restrict(definition)
    denied.restrict(Restriction(deny=["Bash"], label="toolFilter"))
    # An equal restriction is another predicate: its scope resolves a view of its own.
    equal.restrict(Restriction(allow=["Read", "Grep", "Bash"], label="definition"))
    own.add_local(make_tool("Note"))
    assert plain.view().names == ("Bash", "Grep", "Read")
    assert denied.view().names == ("Grep", "Read") and "Bash" not in denied.view()
    assert own.view().names == ("Bash", "Grep", "Note", "Read")
    assert equal.view().names == plain.view().names and equal.view() is not plain.view()
    # The same predicates, nothing of its own: the same view object, and not once the scope
    # holds a tool of its own or a further filter.
    twin = Scope(registry, name="twin")
    twin.restrict(definition)
    assert twin.view() is plain.view()
    twin.add_local(make_tool("Note"))
    assert twin.view() is not own.view() and "Note" in twin.view() and "Note" not in plain.view()
    later = Scope(registry, name="later")
    later.restrict(definition)
    later.restrict(Restriction(deny=["Read"], label="role:worker"))
    assert later.view().names == ("Bash", "Grep") and plain.view().names == ("Bash", "Grep", "Read")
    # The registry moved: each scope resolves again, and they share again.
    registry.remove("Grep")
    assert plain.view().names == ("Bash", "Read") and twin.view() is not plain.view()
    fresh = Scope(registry, name="fresh")
    fresh.restrict(definition, validate=False)
    assert fresh.view() is plain.view() and denied.view().names == ("Read",)
