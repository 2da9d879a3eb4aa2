"""The scheduling actions: ``schedule_agent``, ``schedule_list`` and ``schedule_remove``.

They are tools in the one registry, so in-process callers, the socket (``actions/call``) and a
child that may call them all go through the same view, with the same validation as
``membrane schedule``: exactly one of ``delay_seconds``, ``run_at`` and ``cron``. Each answers
with the schedule as ``Schedule.describe()`` gives it plus its text form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from membrane.durable.schedules import ScheduleBook, format_schedule
from membrane.json_types import JSONDict
from membrane.resolve.guidance import SCHEDULE_ACTION
from membrane.tools.spec import Tool, ToolContext

__all__ = ["SCHEDULE_TOOLS", "schedule_tools"]

#: The scheduling actions, whose results carry their text form in ``text``.
SCHEDULE_TOOLS = (SCHEDULE_ACTION, "schedule_list", "schedule_remove")

_ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "agent": {"type": "string", "minLength": 1},
        "task": {"type": "string", "minLength": 1},
        "delay_seconds": {
            "type": ["number", "string"],
            "description": "Run once after this long: seconds, or 90s, 30m, 2h, 1d.",
        },
        "run_at": {
            "type": "string",
            "description": "Run once at this ISO 8601 time; it must carry Z or an offset.",
        },
        "cron": {
            "type": "string",
            "description": "Run on this cron expression, in the runtime host's time zone.",
        },
        "tz": {"type": "string", "description": "A time zone name for cron (default: host)."},
        "catch_up": {"enum": ["once", "skip"]},
    },
    "required": ["agent", "task"],
    "additionalProperties": False,
}


def schedule_tools(
    book: ScheduleBook, *, role_of: Callable[[ToolContext], str | None] | None = None
) -> tuple[Tool, ...]:
    """The three scheduling actions over ``book``. ``role_of`` gives the calling agent's role
    (from a trusted source), recorded on the schedule: its runs start with that role."""

    async def add(arguments: Mapping[str, Any], context: ToolContext) -> JSONDict:
        schedule = book.add(
            arguments["agent"],
            arguments["task"],
            delay_seconds=arguments.get("delay_seconds"),
            run_at=arguments.get("run_at"),
            cron=arguments.get("cron"),
            tz=arguments.get("tz"),
            catch_up=arguments.get("catch_up", "once"),
            role=role_of(context) if role_of is not None else None,
        )
        described = schedule.describe()
        return {**described, "text": format_schedule(described)}

    async def listing(arguments: Mapping[str, Any], context: ToolContext) -> JSONDict:
        described = [s.describe() for s in book.schedules()]
        return {
            "schedules": list(described),
            "text": "\n".join(format_schedule(d) for d in described) or "no schedules",
        }

    async def remove(arguments: Mapping[str, Any], context: ToolContext) -> JSONDict:
        book.remove(arguments["schedule_id"])
        return {"removed": arguments["schedule_id"], "text": f"removed {arguments['schedule_id']}"}

    return (
        Tool(
            SCHEDULE_ACTION,
            "Schedule an agent to run later: exactly one of delay_seconds (relative, once), "
            "run_at (absolute with Z or an offset, once) or cron (recurring, host time zone "
            "unless tz). Check the next run it returns.",
            _ADD_SCHEMA,
            add,
            origin="host",
            mutating=True,
        ),
        Tool(
            SCHEDULE_TOOLS[1],
            "List the scheduled runs with their time zone and next run.",
            {"type": "object", "additionalProperties": False},
            listing,
            origin="host",
        ),
        Tool(
            SCHEDULE_TOOLS[2],
            "Remove a scheduled run by its id.",
            {
                "type": "object",
                "properties": {"schedule_id": {"type": "string", "minLength": 1}},
                "required": ["schedule_id"],
                "additionalProperties": False,
            },
            remove,
            origin="host",
            mutating=True,
        ),
    )
