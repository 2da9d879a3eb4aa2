"""Code Mode: the SDK module names exactly the visible tools and calls through the view."""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import pytest

from membrane import Restriction, Scope, Tool, ToolContext, ToolRegistry, ToolView
from membrane.errors import ToolNotVisible, ToolSpecError
from membrane.tools import load_sdk

SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File to read."},
        "limit": {"type": ["integer", "null"]},
        "mode": {"enum": ["fast", "slow"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "class": {"type": "boolean"},
        "x-y": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}]},
    },
    "required": ["path"],
}


def _functions(source: str) -> dict[str, ast.AsyncFunctionDef]:
    tree = ast.parse(source)
    return {node.name: node for node in tree.body if isinstance(node, ast.AsyncFunctionDef)}


def _tools_map(source: str) -> dict[str, str]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<sdk>", "exec"), namespace)
    return dict(namespace["TOOLS"])


def test_each_visible_tool_gets_one_typed_function(make_tool: Callable[..., Tool]) -> None:
    view = ToolView.of([make_tool("Read", schema=SCHEMA)])
    function = _functions(view.code_sdk())["Read"]
    params = {arg.arg: ast.unparse(arg.annotation) for arg in function.args.kwonlyargs}  # type: ignore[arg-type]
    assert params == {
        "path": "str",
        "limit": "int | None",
        "mode": "Literal['fast', 'slow'] | None",
        "tags": "list[str] | None",
        "counts": "dict[str, int] | None",
        "class_": "bool | None",
        "x_y": "str | list[float] | None",
    }
    assert "File to read." in (ast.get_docstring(function) or "")


def test_names_that_are_not_identifiers_are_sanitised_and_distinct(
    make_tool: Callable[..., Tool],
) -> None:
    names = ["web-search", "web_search", "2fa", "class", "bind", "_invoke", "mcp.fs.read"]
    source = ToolView.of([make_tool(name) for name in names]).code_sdk()
    mapping = _tools_map(source)
    assert sorted(mapping.values()) == sorted(names)
    assert all(function.isidentifier() for function in mapping)
    assert set(_functions(source)) - {"_invoke"} == set(mapping)


def test_descriptions_cannot_break_the_module(make_tool: Callable[..., Tool]) -> None:
    nasty = 'Ends with a quote" and has """triple""" quotes, a \\ backslash,\x00 a nul and \u2028.'
    schema = {"type": "object", "properties": {"q": {"type": "string", "description": nasty}}}
    source = ToolView.of([make_tool("odd", description=nasty, schema=schema)]).code_sdk()
    compile(source, "<sdk>", "exec")


def test_sdk_calls_run_through_the_view(make_tool: Callable[..., Tool]) -> None:
    registry = ToolRegistry()
    registry.register(make_tool("Read", schema=SCHEMA))
    registry.register(make_tool("Bash"))
    scope = Scope(registry, name="child")
    scope.restrict(Restriction(deny=["Bash"]))
    sdk = load_sdk(scope, ToolContext())
    assert not hasattr(sdk, "Bash")

    async def main() -> Any:
        return await sdk.Read(path="a.txt", class_=True)

    result = anyio.run(main)
    assert result["arguments"] == {"path": "a.txt", "class": True}


def test_sdk_bound_to_a_stale_name_still_cannot_reach_hidden_tools(
    make_tool: Callable[..., Tool],
) -> None:
    view = ToolView.of([make_tool("Read")])
    sdk = load_sdk(lambda: view, ToolContext())

    async def forged() -> Any:
        return await sdk._invoke("Bash", {})

    with pytest.raises(ToolNotVisible):
        anyio.run(forged)


@pytest.mark.parametrize("change", ["removed", "denied"])
def test_sdk_cannot_call_a_tool_the_scope_stopped_showing_after_loading(
    make_tool: Callable[..., Tool], change: str
) -> None:
    registry = ToolRegistry()
    registry.register(make_tool("Read"))
    registry.register(make_tool("Bash"))
    scope = Scope(registry, name="child")
    sdk = load_sdk(scope, ToolContext())
    assert hasattr(sdk, "Bash")
    if change == "removed":
        registry.remove("Bash")
    else:
        scope.restrict(Restriction(deny=["Bash"]))

    async def main() -> Any:
        return await sdk.Bash()

    with pytest.raises(ToolNotVisible) as caught:
        anyio.run(main)
    assert caught.value.code == "tool-not-visible"
    assert anyio.run(lambda: sdk.Read())["tool"] == "Read"


def test_sdk_refuses_a_frozen_view(make_tool: Callable[..., Tool]) -> None:
    with pytest.raises(ToolSpecError) as caught:
        load_sdk(ToolView.of([make_tool("Read")]), ToolContext())  # type: ignore[arg-type]
    assert caught.value.code == "tool-spec-invalid"
    assert "Scope" in caught.value.message
