"""Code metrics: ``count_lines`` counts the lines of a file in the agent's checkout."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from membrane import Tool, ToolContext


async def count_lines(arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
    base = context.cwd or Path.cwd()
    path = (base / str(arguments["path"])).resolve()
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    return {
        "path": str(arguments["path"]),
        "lines": len(lines),
        "blank": sum(1 for line in lines if not line.strip()),
    }


def setup(ext: Any) -> None:
    ext.register_tool(
        Tool(
            name="count_lines",
            description="Count the lines (and blank lines) of a file in the checkout.",
            input_schema={
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": False,
            },
            handler=count_lines,
        )
    )
