"""``membrane schedule add|list|remove``: scheduled work in the project's state.

``add`` takes exactly one of ``--in``, ``--at`` and ``--cron`` (the same validation as the
``schedule_agent`` action) and prints the authoritative time zone and the next run in that
zone's local form and in ISO form, the same text the action returns. ``membrane serve`` fires
due schedules.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

from typer import Argument, Option

from membrane.cli.app import app, echo, group, safe_text
from membrane.cli.helptext import HelpCommand

schedule_app = group("schedule", help="Schedule agents to run later, once or on a cron expression.")
app.add_typer(schedule_app, name="schedule")

_PROJECT = Option("--project", help="The project directory (default: the current directory).")
_STATE = Option(
    "--state", help="The state file (default: $MEMBRANE_HOME/projects/<project-id>/state.db)."
)
_JSON = Option("--json", help="Print JSON instead of text.")


def _book(project: Path | None, state: Path | None):  # type: ignore[no-untyped-def]
    from membrane.config.load import membrane_home
    from membrane.durable.schedules import ScheduleBook
    from membrane.store.location import locate_state, migrate_legacy_state
    from membrane.store.sqlite import SQLiteStore
    from membrane.workspace import require_folder

    if state is None:
        location = locate_state(
            require_folder("--project", project or Path.cwd()), home=membrane_home()
        )
        migrate_legacy_state(location)
        state = location.path
    state.parent.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(state)
    return store, ScheduleBook(store)


def _emit(described: object, as_json: bool) -> None:
    from membrane.durable.schedules import format_schedule

    if as_json:
        document = {"schedules": described} if isinstance(described, list) else described
        echo(safe_text(json.dumps(document, indent=2)))
    elif isinstance(described, list):
        echo("\n".join(safe_text(format_schedule(d)) for d in described) or "no schedules")
    else:
        echo(safe_text(format_schedule(described)))  # type: ignore[arg-type]


@schedule_app.command("add", cls=HelpCommand)
def add(
    agent: Annotated[str, Argument(metavar="AGENT", help="The agent to start.")],
    task: Annotated[str, Argument(metavar="TASK", help="The task it is given.")],
    delay: Annotated[
        str | None, Option("--in", help="Once, after this long: 90s, 30m, 2h, 1d.")
    ] = None,
    at: Annotated[
        str | None,
        Option("--at", help="Once, at this ISO 8601 time with Z or an offset."),
    ] = None,
    cron: Annotated[
        str | None,
        Option("--cron", help="Recurring, on this cron expression (host time zone)."),
    ] = None,
    tz: Annotated[
        str | None, Option("--tz", help="The time zone for --cron (default: the host's).")
    ] = None,
    catch_up: Annotated[
        str,
        Option("--catch-up", help="A due time missed while no runtime ran: once (fire) or skip."),
    ] = "once",
    as_json: Annotated[bool, _JSON] = False,
    project: Annotated[Path | None, _PROJECT] = None,
    state: Annotated[Path | None, _STATE] = None,
) -> None:
    """Schedule AGENT to run TASK: exactly one of --in, --at and --cron."""
    store, book = _book(project, state)
    with store:
        schedule = book.add(
            agent, task, delay_seconds=delay, run_at=at, cron=cron, tz=tz, catch_up=catch_up
        )
    _emit(schedule.describe(), as_json)


@schedule_app.command("list", cls=HelpCommand)
def list_schedules(
    as_json: Annotated[bool, _JSON] = False,
    project: Annotated[Path | None, _PROJECT] = None,
    state: Annotated[Path | None, _STATE] = None,
) -> None:
    """Every schedule with its time zone and next run."""
    store, book = _book(project, state)
    with store:
        described = [s.describe() for s in book.schedules()]
    _emit(described, as_json)


@schedule_app.command("remove", cls=HelpCommand)
def remove(
    schedule_id: Annotated[
        str, Argument(metavar="SCHEDULE_ID", help="The schedule's id (from `schedule list`).")
    ],
    project: Annotated[Path | None, _PROJECT] = None,
    state: Annotated[Path | None, _STATE] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Remove a schedule."""
    store, book = _book(project, state)
    with store:
        book.remove(schedule_id)
    echo(json.dumps({"removed": schedule_id}) if as_json else f"removed {schedule_id}")
