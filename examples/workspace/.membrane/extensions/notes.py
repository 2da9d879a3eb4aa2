"""Note-taking tools for reviewers: ``summarize`` condenses text, ``annotate`` records a remark."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from membrane import Tool, ToolContext

NOTES: list[dict[str, Any]] = []


async def summarize(arguments: Mapping[str, Any], context: ToolContext) -> str:
    text = " ".join(str(arguments["text"]).split())
    limit = int(arguments.get("max_words", 30))
    words = text.split(" ")
    return text if len(words) <= limit else " ".join(words[:limit]) + " ..."


async def annotate(arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
    note = {"agent": context.agent, "where": arguments["where"], "note": arguments["note"]}
    NOTES.append(note)
    return {"recorded": len(NOTES), **note}


def setup(ext: Any) -> None:
    ext.register_tool(
        Tool(
            name="summarize",
            description="Condense a passage to at most max_words words.",
            input_schema={
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "max_words": {"type": "integer", "minimum": 1},
                },
                "required": ["text"],
                "additionalProperties": False,
            },
            handler=summarize,
        )
    )
    ext.register_tool(
        Tool(
            name="annotate",
            description="Record a remark about a place in the code (path:line).",
            input_schema={
                "type": "object",
                "properties": {"where": {"type": "string"}, "note": {"type": "string"}},
                "required": ["where", "note"],
                "additionalProperties": False,
            },
            handler=annotate,
        )
    )
    ext.add_prompt_section(
        "notes",
        "Notes: when a finding takes more than three sentences, condense it with summarize "
        "before reporting it.",
    )
