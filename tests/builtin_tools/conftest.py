"""Fixtures for the built-in tools: a checkout folder and a folder outside it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from membrane.builtin_tools import builtin_tools
from membrane.tools.spec import Tool, ToolContext


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    root.mkdir()
    return root.resolve()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder.resolve()


@pytest.fixture
def context(checkout: Path) -> ToolContext:
    return ToolContext(agent="worker", cwd=checkout)


def tool_named(name: str) -> Tool:
    return next(tool for tool in builtin_tools() if tool.name == name)


async def call(name: str, arguments: Mapping[str, Any], context: ToolContext) -> Any:
    return await tool_named(name).handler(arguments, context)
