"""Restrictions: allow before deny, and the loud checks at installation."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from membrane import Restriction, Scope, Tool, ToolRegistry
from membrane.errors import EmptyToolFilter, ToolFilterError, UnknownToolInFilter


@pytest.fixture
def registry(make_tool: Callable[..., Tool]) -> ToolRegistry:
    registry = ToolRegistry()
    for name in ("Read", "Glob", "Grep", "Bash"):
        registry.register(make_tool(name))
    return registry


def test_allow_applies_before_deny(make_tool: Callable[..., Tool]) -> None:
    restriction = Restriction(allow=["Read", "Bash"], deny=["Bash"])
    assert restriction.admits(make_tool("Read"))
    assert not restriction.admits(make_tool("Bash"))
    assert not restriction.admits(make_tool("Glob"))


def test_filter_with_neither_allow_nor_deny_is_refused(registry: ToolRegistry) -> None:
    scope = Scope(registry, name="child")
    with pytest.raises(EmptyToolFilter) as caught:
        scope.restrict(Restriction())
    assert caught.value.code == "empty-tool-filter"
    assert "toolFilter" in caught.value.message
    assert scope.restrictions == ()


def test_empty_allow_list_is_valid_and_hides_every_global(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    scope = Scope(registry, name="child")
    scope.add_reserved(make_tool("run_code"))
    scope.restrict(Restriction(allow=[]))
    assert scope.view().names == ("run_code",)


def test_unknown_name_is_refused_with_the_closest_real_name(registry: ToolRegistry) -> None:
    scope = Scope(registry, name="child")
    with pytest.raises(UnknownToolInFilter) as caught:
        scope.restrict(Restriction(allow=["Read", "Reed"]))
    error = caught.value
    assert error.code == "unknown-tool-in-filter"
    assert "'Reed'" in error.message
    assert "did you mean 'Read'" in error.message
    assert error.data["name"] == "Reed"
    assert error.data["suggestion"] == "Read"
    assert error.data["field"] == "allow"


def test_wrong_case_suggests_the_canonical_name(registry: ToolRegistry) -> None:
    with pytest.raises(UnknownToolInFilter) as caught:
        Restriction(deny=["bash"]).validate(registry)
    assert caught.value.data["suggestion"] == "Bash"
    assert "'bash'" in caught.value.message


def test_name_with_no_close_match_has_no_suggestion(registry: ToolRegistry) -> None:
    with pytest.raises(UnknownToolInFilter) as caught:
        Restriction(deny=["zzzzzzzz"]).validate(registry)
    assert caught.value.data["suggestion"] is None
    assert "'zzzzzzzz'" in caught.value.message


def test_scope_local_only_name_is_refused(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    scope = Scope(registry, name="child")
    scope.add_local(make_tool("report"))
    with pytest.raises(UnknownToolInFilter) as caught:
        scope.restrict(Restriction(deny=["report"]))
    assert caught.value.code == "unknown-tool-in-filter"
    assert "'report'" in caught.value.message
    assert "is not a tool this filter can name" in caught.value.message


def test_every_unnameable_entry_gets_the_same_wording(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    scope = Scope(registry, name="child")
    scope.add_local(make_tool("xylophone"))
    scope.add_reserved(make_tool("run_code"))
    messages = set()
    for name in ("xylophone", "run_code", "nothing_by_this_name"):
        with pytest.raises(UnknownToolInFilter) as caught:
            scope.restrict(Restriction(deny=[name]))
        messages.add(caught.value.message.replace(repr(name), "X"))
    assert messages == {
        "toolFilter.deny names X, which is not a tool this filter can name (filters name "
        "global tools; scope-local and reserved tools are outside them)"
    }


def test_a_caller_sees_no_trace_of_tools_outside_what_it_may_see(
    registry: ToolRegistry,
) -> None:
    visible = ["Read", "Glob"]
    hidden = Restriction(deny=["Bash"], label="toolFilter")
    missing = Restriction(deny=["Bosh"], label="toolFilter")
    with pytest.raises(UnknownToolInFilter) as hidden_error:
        hidden.validate(registry, visible=visible)
    with pytest.raises(UnknownToolInFilter) as missing_error:
        missing.validate(registry, visible=visible)
    assert hidden_error.value.data == {
        "name": "Bash",
        "suggestion": None,
        "field": "deny",
        "label": "toolFilter",
    }
    assert missing_error.value.data["suggestion"] is None
    assert hidden_error.value.message.replace("Bash", "Bosh") == missing_error.value.message


def test_suggestions_come_only_from_the_visible_names(registry: ToolRegistry) -> None:
    with pytest.raises(UnknownToolInFilter) as caught:
        Restriction(allow=["Grap"]).validate(registry, visible=["Glob", "Grep"])
    assert caught.value.data["suggestion"] == "Grep"
    with pytest.raises(UnknownToolInFilter) as caught:
        Restriction(allow=["Grap"]).validate(registry, visible=["Glob"])
    assert caught.value.data["suggestion"] is None
    Restriction(allow=["Grep"]).validate(registry, visible=["Grep"])


def test_reserved_name_is_refused(registry: ToolRegistry, make_tool: Callable[..., Tool]) -> None:
    scope = Scope(registry, name="child")
    scope.add_reserved(make_tool("run_sql"))
    with pytest.raises(UnknownToolInFilter) as caught:
        scope.restrict(Restriction(allow=["run_sql"]))
    assert caught.value.code == "unknown-tool-in-filter"
    assert "'run_sql'" in caught.value.message


def test_unvalidated_restriction_may_name_tools_not_registered_yet(
    registry: ToolRegistry, make_tool: Callable[..., Tool]
) -> None:
    scope = Scope(registry, name="child")
    scope.restrict(Restriction(allow=["Read", "later"]), validate=False)
    registry.register(make_tool("later"))
    assert scope.view().names == ("Read", "later")


def test_single_string_is_not_taken_as_a_list_of_names() -> None:
    with pytest.raises(ToolFilterError, match="'Read'") as caught:
        Restriction(allow="Read")
    assert caught.value.code == "tool-filter-invalid"


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"allow": ["Read"], "permit": ["Bash"]}, "'permit'"),
        ({"deny": "Bash"}, "deny"),
        ({"allow": ["Read", 3]}, "3"),
        ({"allow": [""]}, "''"),
        (["Read"], "mapping"),
    ],
)
def test_untrusted_filter_mapping_is_checked(data: object, fragment: str) -> None:
    with pytest.raises(ToolFilterError) as caught:
        Restriction.from_mapping(data)  # type: ignore[arg-type]
    assert fragment in caught.value.message


def test_filter_mapping_builds_the_same_restriction() -> None:
    built = Restriction.from_mapping({"allow": ["Read"], "deny": ["Bash"]})
    assert built == Restriction(allow=["Read"], deny=["Bash"])
    assert built.allow == frozenset({"Read"})
    assert built.deny == frozenset({"Bash"})
