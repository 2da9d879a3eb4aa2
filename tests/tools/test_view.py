"""ToolView: one resolution for schemas, lookup and execution."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import pytest

from membrane import Restriction, Scope, Tool, ToolContext, ToolRegistry, ToolView
from membrane.errors import (
    ToolArgumentsInvalid,
    ToolFailed,
    ToolNotVisible,
    ToolSpecError,
    UnknownRun,
)

pytestmark = pytest.mark.anyio

ITEMS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        }
    },
    "required": ["items"],
}


@pytest.fixture
def scope(make_tool: Callable[..., Tool]) -> Scope:
    registry = ToolRegistry()
    for name in ("Read", "Bash", "BashOutput"):
        registry.register(make_tool(name))
    registry.register(make_tool("batch", schema=ITEMS_SCHEMA))
    scope = Scope(registry, name="child")
    scope.restrict(Restriction(deny=["Bash", "BashOutput"]))
    return scope


async def test_call_runs_a_visible_tool(scope: Scope) -> None:
    result = await scope.view().call("Read", {"path": "a"}, ToolContext())
    assert result == {"tool": "Read", "origin": "builtin", "arguments": {"path": "a"}}


async def test_hidden_tool_cannot_run_and_the_error_names_only_the_request(scope: Scope) -> None:
    view = scope.view()
    for requested in ("Bash", "bash", "Bas", "nothing"):
        with pytest.raises(ToolNotVisible) as caught:
            await view.call(requested, {}, ToolContext())
        error = caught.value
        assert error.code == "tool-not-visible"
        assert error.data == {"name": requested}
        shown = error.message.replace(repr(requested), "")
        assert "Bash" not in shown
        assert "mean" not in shown
    with pytest.raises(ToolNotVisible):
        view.get("Bash")
    assert "Bash" not in view
    assert view.find("Bash") is None


async def test_arguments_are_validated_before_the_handler_with_a_json_path(
    make_tool: Callable[..., Tool],
) -> None:
    ran: list[Mapping[str, Any]] = []

    async def handler(arguments: Mapping[str, Any], context: ToolContext) -> None:
        ran.append(arguments)

    tool = Tool("batch", "Batch.", ITEMS_SCHEMA, handler)
    view = ToolView.of([tool])
    with pytest.raises(ToolArgumentsInvalid) as caught:
        await view.call("batch", {"items": [{"name": "a"}, {"name": 3}]}, ToolContext())
    error = caught.value
    assert error.code == "tool-arguments-invalid"
    assert error.data["path"] == "$.items[1].name"
    assert "$.items[1].name" in error.message
    assert "'batch'" in error.message
    assert ran == []


async def test_arguments_that_are_not_an_object_are_refused(scope: Scope) -> None:
    with pytest.raises(ToolArgumentsInvalid) as caught:
        await scope.view().call("Read", ["a"], ToolContext())  # type: ignore[arg-type]
    assert caught.value.data["path"] == "$"


async def test_read_only_arguments_are_validated_and_handed_over_as_a_dict(
    make_tool: Callable[..., Tool],
) -> None:
    ran: list[object] = []

    async def handler(arguments: Mapping[str, Any], context: ToolContext) -> None:
        ran.append(arguments)

    view = ToolView.of([Tool("batch", "Batch.", ITEMS_SCHEMA, handler)])
    with pytest.raises(ToolArgumentsInvalid):
        await view.call("batch", MappingProxyType({"items": [{}]}), ToolContext())
    await view.call("batch", MappingProxyType({"items": [{"name": "a"}]}), ToolContext())
    assert ran == [{"items": [{"name": "a"}]}] and type(ran[0]) is dict


async def test_missing_required_argument_is_reported_at_the_root(scope: Scope) -> None:
    with pytest.raises(ToolArgumentsInvalid) as caught:
        await scope.view().call("batch", {}, ToolContext())
    assert caught.value.data["path"] == "$"
    assert "'items'" in caught.value.message


async def test_handler_errors_become_tool_failed() -> None:
    async def broken(arguments: Mapping[str, Any], context: ToolContext) -> None:
        raise OSError("disk on fire")

    view = ToolView.of([Tool("Write", "Write.", {"type": "object"}, broken)])
    with pytest.raises(ToolFailed) as caught:
        await view.call("Write", {}, ToolContext())
    assert caught.value.code == "tool-failed"
    assert "disk on fire" in caught.value.message
    assert isinstance(caught.value.__cause__, OSError)


async def test_membrane_errors_from_handlers_pass_through() -> None:
    async def unknown(arguments: Mapping[str, Any], context: ToolContext) -> None:
        raise UnknownRun("no run r1", run_id="r1")

    view = ToolView.of([Tool("TaskWait", "Wait.", {"type": "object"}, unknown)])
    with pytest.raises(UnknownRun):
        await view.call("TaskWait", {}, ToolContext())


async def test_deferred_tool_loads_once_on_first_use() -> None:
    loads: list[str] = []

    async def placeholder(arguments: Mapping[str, Any], context: ToolContext) -> str:
        raise AssertionError("the placeholder never runs")

    async def real(arguments: Mapping[str, Any], context: ToolContext) -> str:
        return f"searched {arguments['query']}"

    async def loader() -> Tool:
        loads.append("search")
        schema = {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        }
        return Tool("search", "Search.", schema, real)

    entry = Tool(
        "search",
        "Search (deferred).",
        {"type": "object"},
        placeholder,
        deferred=True,
        loader=loader,
    )
    registry = ToolRegistry()
    registry.extension("mcp").register_tool(entry)
    view = Scope(registry, name="child").view()
    assert view.get("search").deferred
    assert await view.call("search", {"query": "x"}, ToolContext()) == "searched x"
    assert await view.call("search", {"query": "y"}, ToolContext()) == "searched y"
    with pytest.raises(ToolArgumentsInvalid):
        await view.call("search", {}, ToolContext())
    assert loads == ["search"]


async def test_deferred_tool_that_cannot_load_fails_the_call() -> None:
    async def handler(arguments: Mapping[str, Any], context: ToolContext) -> None:
        return None

    async def loader() -> Tool:
        raise ConnectionError("server gone")

    entry = Tool("search", "S.", {"type": "object"}, handler, deferred=True, loader=loader)
    with pytest.raises(ToolFailed, match="server gone"):
        await ToolView.of([entry]).call("search", {}, ToolContext())


def test_schemas_and_renderings_name_the_same_tools_in_order(scope: Scope) -> None:
    view = scope.view()
    schemas = view.schemas()
    assert [s["name"] for s in schemas] == list(view.names) == ["Read", "batch"]
    assert schemas[1] == {
        "name": "batch",
        "description": "The batch tool.",
        "input_schema": ITEMS_SCHEMA,
    }
    assert view.anthropic_tools() == schemas
    assert view.openai_tools()[1] == {
        "type": "function",
        "function": {
            "name": "batch",
            "description": "The batch tool.",
            "parameters": ITEMS_SCHEMA,
        },
    }
    assert [t.name for t in view.tools()] == ["Read", "batch"]


def test_view_of_refuses_two_tools_with_one_name(make_tool: Callable[..., Tool]) -> None:
    with pytest.raises(ToolSpecError, match="'Read'") as caught:
        ToolView.of([make_tool("Read"), make_tool("Read")])
    assert caught.value.code == "tool-spec-invalid"


async def test_a_schema_the_validator_cannot_apply_fails_as_a_spec_error(
    make_tool: Callable[..., Tool],
) -> None:
    looping = {
        "type": "object",
        "properties": {"a": {"allOf": [{"$ref": "#/properties/a"}]}},
    }
    view = ToolView.of([make_tool("loop", schema=looping)])
    with pytest.raises(ToolSpecError) as caught:
        await view.call("loop", {"a": 1}, ToolContext())
    assert caught.value.code == "tool-spec-invalid"
    assert caught.value.data == {"name": "loop"}
    assert "RecursionError" in caught.value.message
