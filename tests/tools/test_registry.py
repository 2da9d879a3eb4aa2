"""The live registry: versions, listeners, the change log and extension tool maps."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from membrane import Tool, ToolRegistry
from membrane.errors import ToolSpecError
from membrane.lowlevel import RegistryChange
from membrane.tools import schemas


def test_every_change_bumps_the_version_and_reaches_listeners(
    make_tool: Callable[..., Tool],
) -> None:
    registry = ToolRegistry()
    heard: list[RegistryChange] = []
    registry.subscribe(heard.append)
    registry.register(make_tool("Read"))
    registry.register(make_tool("Read", description="newer"), replace=True)
    registry.remove("Read")
    assert registry.version == 3
    assert [(c.version, c.kind, c.name) for c in heard] == [
        (1, "registered", "Read"),
        (2, "replaced", "Read"),
        (3, "removed", "Read"),
    ]
    assert heard[1].previous is heard[0].tool
    assert heard[2].tool is None


def test_unsubscribed_listener_hears_nothing_more(make_tool: Callable[..., Tool]) -> None:
    registry = ToolRegistry()
    heard: list[RegistryChange] = []
    unsubscribe = registry.subscribe(heard.append)
    registry.register(make_tool("Read"))
    unsubscribe()
    registry.register(make_tool("Glob"))
    assert [c.name for c in heard] == ["Read"]


def test_a_failing_listener_does_not_stop_the_others_or_undo_the_change(
    make_tool: Callable[..., Tool],
) -> None:
    registry = ToolRegistry()
    heard: list[str] = []

    def broken(change: RegistryChange) -> None:
        raise RuntimeError("listener bug")

    registry.subscribe(broken)
    registry.subscribe(lambda change: heard.append(change.name))
    with pytest.raises(RuntimeError, match="listener bug"):
        registry.register(make_tool("Read"))
    assert heard == ["Read"]
    assert "Read" in registry


def test_duplicate_registration_fails_unless_replacing(make_tool: Callable[..., Tool]) -> None:
    registry = ToolRegistry()
    registry.register(make_tool("Read"))
    with pytest.raises(ToolSpecError) as caught:
        registry.register(make_tool("Read"))
    assert caught.value.code == "tool-spec-invalid"
    assert "'Read'" in caught.value.message
    assert registry.version == 1


def test_removing_an_unknown_tool_names_it(make_tool: Callable[..., Tool]) -> None:
    registry = ToolRegistry()
    with pytest.raises(ToolSpecError, match="'Nope'") as caught:
        registry.remove("Nope")
    assert caught.value.code == "tool-spec-invalid"


@pytest.mark.parametrize(
    ("name", "schema", "fragment"),
    [
        ("has space", {"type": "object"}, "'has space'"),
        ("", {"type": "object"}, "''"),
        ("Read", {"type": "string"}, "'Read'"),
        ("Read", {"type": "object", "properties": {"x": {"type": "nonsense"}}}, "properties/x"),
    ],
)
def test_malformed_tools_are_refused_with_the_offending_part(
    make_tool: Callable[..., Tool], name: str, schema: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ToolSpecError) as caught:
        ToolRegistry().register(make_tool(name, schema=schema))
    assert caught.value.code == "tool-spec-invalid"
    assert fragment in caught.value.message


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        (
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
            "properties/a/$ref",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "https://example.invalid/a.json"}}},
            "properties/a/$ref",
        ),
        (
            {"type": "object", "properties": {"a": {"$dynamicRef": "#/$defs/missing"}}},
            "properties/a/$dynamicRef",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}},
            "properties/a/$ref",
        ),
        (
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "items": [{"$ref": "#/definitions/nope"}],
            },
            "items/0/$ref",
        ),
    ],
)
def test_a_reference_that_cannot_be_followed_is_refused_at_registration(
    make_tool: Callable[..., Tool], schema: dict[str, object], where: str
) -> None:
    with pytest.raises(ToolSpecError) as caught:
        ToolRegistry().register(make_tool("Read", schema=schema))
    assert caught.value.code == "tool-spec-invalid"
    assert caught.value.data["path"] == where


@pytest.mark.parametrize(
    "schema",
    [
        {
            "type": "object",
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
            "properties": {"a": {"$ref": "#/$defs/node"}, "b": {"const": {"$ref": "#/no"}}},
        },
        {
            "$id": "https://example.com/root.json",
            "type": "object",
            "$defs": {"x": {"$id": "sub.json", "$defs": {"y": {"type": "integer"}}}},
            "properties": {"a": {"$ref": "sub.json#/$defs/y"}},
        },
        {
            "type": "object",
            "properties": {"a": {"$ref": "https://json-schema.org/draft/2020-12/schema"}},
        },
    ],
)
def test_references_that_resolve_are_accepted(
    make_tool: Callable[..., Tool], schema: dict[str, object]
) -> None:
    ToolRegistry().register(make_tool("Read", schema=schema))


def test_a_repeated_schema_is_checked_once(
    make_tool: Callable[..., Tool], monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[object] = []
    full_check = schemas._check

    def counting(schema: Any) -> Any:
        checked.append(schema)
        return full_check(schema)

    monkeypatch.setattr(schemas, "_check", counting)
    monkeypatch.setattr(schemas, "_checked", {})
    # A ``pattern`` needs the full check (plain keywords alone never reach it).
    unique = {"type": "object", "properties": {"q": {"type": "string", "pattern": "x" * 40}}}
    registry = ToolRegistry()
    for index in range(50):
        registry.register(make_tool(f"tool_{index}", schema=copy.deepcopy(unique)))
    assert len(checked) == 1
    with pytest.raises(ToolSpecError):
        registry.register(make_tool("bad", schema={"type": "object", "required": 3}))
    with pytest.raises(ToolSpecError):
        registry.register(make_tool("bad", schema={"type": "object", "required": 3}))
    assert len(checked) == 2


def test_snapshot_does_not_move_with_later_changes(make_tool: Callable[..., Tool]) -> None:
    registry = ToolRegistry()
    registry.register(make_tool("Read"))
    snapshot = registry.tools()
    registry.register(make_tool("Glob"))
    assert sorted(snapshot) == ["Read"]
    assert sorted(registry.tools()) == ["Glob", "Read"]


def test_registry_refuses_a_reserved_tool(make_tool: Callable[..., Tool]) -> None:
    registry = ToolRegistry()
    registry.register(make_tool("Read"))
    with pytest.raises(ToolSpecError) as caught:
        registry.register(make_tool("run_code", reserved=True))
    assert caught.value.code == "tool-spec-invalid"
    assert "scope-local" in caught.value.message
    assert "Scope.add_reserved" in caught.value.message
    assert "run_code" not in registry
    assert registry.version == 1
    assert registry.restrictable_names() == frozenset({"Read"})


def test_extension_cannot_register_a_reserved_tool(make_tool: Callable[..., Tool]) -> None:
    registry = ToolRegistry()
    tools = registry.extension("alpha")
    with pytest.raises(ToolSpecError) as caught:
        tools.register_tool(make_tool("run_code", reserved=True))
    assert caught.value.data == {"name": "run_code", "extension": "alpha"}
    assert "Scope.add_reserved" in caught.value.message
    assert tools.names() == frozenset()
    assert len(registry) == 0


def test_change_log_replays_from_any_recent_version(make_tool: Callable[..., Tool]) -> None:
    registry = ToolRegistry()
    for name in ("A", "B", "C"):
        registry.register(make_tool(name))
    assert [c.name for c in registry.changes_since(1) or ()] == ["B", "C"]
    assert registry.changes_since(3) == ()
    assert registry.changes_since(7) is None


def test_extension_map_owns_its_tools_and_sets_their_origin(
    make_tool: Callable[..., Tool],
) -> None:
    registry = ToolRegistry()
    alpha = registry.extension("alpha")
    alpha.register_tool(make_tool("search"))
    alpha.register_tool(make_tool("Search"))
    assert alpha.names() == frozenset({"search", "Search"})
    assert registry.get("search") is not None
    assert registry.get("search").origin == "extension:alpha"  # type: ignore[union-attr]
    assert registry.extension("alpha") is alpha
    alpha.remove_tool("Search")
    assert alpha.names() == frozenset({"search"})


def test_extension_reregistering_its_own_tool_replaces_it(
    make_tool: Callable[..., Tool],
) -> None:
    registry = ToolRegistry()
    alpha = registry.extension("alpha")
    alpha.register_tool(make_tool("search"))
    alpha.register_tool(make_tool("search", description="v2"))
    assert registry.get("search").description == "v2"  # type: ignore[union-attr]


def test_extension_cannot_take_a_name_from_another_origin(
    make_tool: Callable[..., Tool],
) -> None:
    registry = ToolRegistry()
    registry.register(make_tool("Read"))
    with pytest.raises(ToolSpecError, match="'Read'") as caught:
        registry.extension("alpha").register_tool(make_tool("Read"))
    assert caught.value.code == "tool-spec-invalid"
    assert registry.get("Read").origin == "builtin"  # type: ignore[union-attr]


def test_extension_cannot_remove_a_tool_it_does_not_own(make_tool: Callable[..., Tool]) -> None:
    registry = ToolRegistry()
    registry.register(make_tool("Read"))
    with pytest.raises(ToolSpecError, match="'Read'"):
        registry.extension("alpha").remove_tool("Read")
    assert "Read" in registry


def test_a_prefilled_memo_skips_no_check_at_registration(make_tool: Callable[..., Tool]) -> None:
    registry = ToolRegistry()
    good = make_tool("Good")
    registry.register(good)
    forged = [
        make_tool("bad name"),
        make_tool("Bad", schema={"type": "object", "properties": 3}),
        make_tool("Ref", schema={"type": "object", "$ref": "#/$defs/none"}),
    ]
    for tool in forged:
        tool.memo.update(good.memo)  # another tool's proof covers nothing here
        tool.memo["schema"] = {"type": "object"}
        with pytest.raises(ToolSpecError):
            registry.register(tool)
    assert set(registry.tools()) == {"Good"}
