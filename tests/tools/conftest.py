"""Fixtures for the tool registry tests: a factory for small, well-formed tools."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from membrane import Tool, ToolContext

OBJECT: Mapping[str, Any] = {"type": "object"}


def _make_tool(
    name: str,
    *,
    schema: Mapping[str, Any] | None = None,
    description: str | None = None,
    origin: str = "builtin",
    reserved: bool = False,
) -> Tool:
    async def handler(arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        return {"tool": name, "origin": origin, "arguments": dict(arguments)}

    return Tool(
        name,
        f"The {name} tool." if description is None else description,
        OBJECT if schema is None else schema,
        handler,
        origin=origin,
        reserved=reserved,
    )


@pytest.fixture(scope="session")
def make_tool() -> Callable[..., Tool]:
    return _make_tool
