"""Code Mode: the SDK module names exactly the visible tools and calls through the view."""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

from membrane import Tool, ToolView

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
