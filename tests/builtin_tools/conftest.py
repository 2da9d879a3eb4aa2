"""Fixtures for the built-in tools: a checkout folder and a folder outside it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from membrane.builtin_tools import builtin_tools
from membrane.sandbox import SandboxPolicy
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


def tool_named(name: str, *, read_paths: Sequence[Path] = ()) -> Tool:
    tools = builtin_tools(sandbox=SandboxPolicy(read_paths=read_paths))
    return next(tool for tool in tools if tool.name == name)


async def call(
    name: str,
    arguments: Mapping[str, Any],
    context: ToolContext,
    *,
    read_paths: Sequence[Path] = (),
) -> Any:
    return await tool_named(name, read_paths=read_paths).handler(arguments, context)
