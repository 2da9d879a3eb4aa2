"""``membrane runs`` and ``membrane resume``: the runs a project's store holds, and continuing one.

Both are runtime-backed by default (``cli.backend``: the machine runtime, started in the
background when none answers, serves them), with the same output as headless. Headless
(``--headless``, ``MEMBRANE_HEADLESS=1``, ``--state``) they read the project's state
(``$MEMBRANE_HOME/projects/<project-id>/state.db``, or ``--state``) and never create it: a
project without one has no runs to list or resume. A legacy ``<project>/.membrane/state.db``
is moved there first (``membrane.store.location``). Headless ``runs`` only reads the store (it
imports no extension); ``resume`` opens the project as ``membrane run`` does and prints the
resumed run the same way.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from typer import Argument, Exit, Option

from membrane.cli.app import EXIT_RUN, app, group
from membrane.cli.helptext import HelpCommand
from membrane.cli.options import HEADLESS_OPTION, MODEL_HELP, SOCKET_OPTION, STATE_OPTION
from membrane.cli.screen import Screen, Table
from membrane.errors import InvalidRequest, UnknownRun

if TYPE_CHECKING:  # for annotations; the commands import what they run
    from membrane.runtime import RunInfo, SubagentRuntime
    from membrane.runtime.listing import RunRow
    from membrane.store.select import StateTarget

__all__ = ["existing_state", "prune", "resume", "runs"]


def _when(seconds: float) -> str:
    """``created_at`` as local time; a value no clock gives is shown as stored."""
    try:
        return datetime.fromtimestamp(seconds).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return str(seconds)


def _holder(owner: str | None) -> str:
    """A lease owner as the table shows it: its host and pid (``-``: none)."""
    return "-" if owner is None else ":".join(owner.split(":")[:2])


def _table(rows: list[RunRow], state: str) -> Table:
    table = Table(
        ("run", "agent", "parent", "depth", "status", "held by", "created", "pending",
         "tokens in/out", "subtree in/out", "cost/subtree"),
        title=f"runs in {state}",
        caption="held by: the process driving it (host:pid of its lease); pending: "
        "completion notices still owed to the run; resume takes them; "
        "cost in US dollars, unknown where a model's price is not known",
        right=("depth", "pending", "tokens in/out", "subtree in/out", "cost/subtree"),
        # A run id is what the reader copies into ``membrane resume``: never cut, never wrapped.
        whole=("run", "parent", "created", "tokens in/out", "subtree in/out", "cost/subtree"),
    )  # fmt: skip
    for row in rows:
        table.add_row(
            row.run_id,
            row.agent,
            row.parent_id or "-",
            str(row.depth),
            row.status,
            _holder(row.held_by),
            _when(row.created_at),
            str(row.pending_notices),
            f"{row.usage.input_tokens}/{row.usage.output_tokens}",
            f"{row.usage_total.input_tokens}/{row.usage_total.output_tokens}",
            f"{money(row.cost)}/{money(row.cost_total)}",
        )
    return table


def money(dollars: float | None) -> str:
    """A cost as the CLI shows it: ``$0.001234``, or ``unknown`` (never 0 for unknown)."""
    return "unknown" if dollars is None else f"${dollars:.6f}"


def existing_state(
    project: Path, state: str | Path | None, *, home: Path | None = None
) -> StateTarget:
    """The state of ``project``: ``state`` when given (``--state``: a file or a
    ``postgresql://`` URL), else the database ``MEMBRANE_STATE_URL`` or the settings'
    ``state_url`` names, else the project's file (moving a legacy one first), which may not
    exist. Nothing is created when there is no state."""
    from membrane.config.load import load_settings, membrane_home
    from membrane.store.location import locate_state, migrate_legacy_state
    from membrane.store.select import chosen_state, target_of
    from membrane.workspace import require_folder

    if state is not None:
        return target_of(state)
    home = membrane_home() if home is None else home
    folder = require_folder("--project", project)
    chosen = chosen_state(None, settings_url=load_settings(project=folder, home=home).state_url)
    if chosen is not None:
        return chosen
    location = locate_state(folder, home=home)
    migrate_legacy_state(location)
    return location.path


def state_exists(state: StateTarget) -> bool:
    """Whether there is a store to read at ``state`` (a database always is one)."""
    return isinstance(state, str) or state.exists()


runs_app = group(
    "runs",
    help="The runs a project's store holds: list them (the default), or prune finished ones.",
    default="list",
)
app.add_typer(runs_app, name="runs")


@runs_app.command("list", cls=HelpCommand)
def runs(
    project: Annotated[Path, Option(help="The project folder.")] = Path("."),
    as_json: Annotated[
        bool, Option("--json", help="Print one JSON document: the state file and its runs.")
    ] = False,
    state_file: Annotated[str | None, STATE_OPTION] = None,
    headless: Annotated[bool, HEADLESS_OPTION] = False,
    socket: Annotated[Path | None, SOCKET_OPTION] = None,
) -> None:
    """List the runs stored in the project's state, oldest first: id, agent, parent, depth,
    status, creation time and the completion notices still owed to each.

    Runtime-backed by default, starting a runtime when none answers (inside a run, only its
    own descendants); with --headless (or MEMBRANE_HEADLESS=1) or --state only the store is
    read here: no extension is imported and no file is created.
    """
    import anyio

    from membrane.cli.backend import runtime_backed
    from membrane.runtime.listing import list_runs
    from membrane.store.select import shown

    state: StateTarget
    if runtime_backed(headless=headless, local_only=state_file is not None):
        rows, state = anyio.run(lambda: _served_runs(project, socket))
        why = f"no runs stored in {state}"
    else:
        state = existing_state(project, state_file)
        # Opening a store creates it; a project that never ran anything must stay untouched.
        if not state_exists(state):
            rows, why = [], f"no runs: {state} does not exist"
        else:
            rows, why = list_runs(state), f"no runs stored in {shown(state)}"
    if as_json:
        listed = {"state": shown(state), "runs": [row.to_dict() for row in rows]}
        sys.stdout.write(json.dumps(listed, ensure_ascii=False) + "\n")
        sys.stdout.flush()
        return
    if not rows:
        Screen().line(why)
        return
    Screen().table(_table(rows, shown(state)))


async def _served_runs(project: Path, socket: Path | None) -> tuple[list[RunRow], StateTarget]:
    from membrane.cli.backend import runtime_session
    from membrane.runtime.listing import row_from_dict
    from membrane.store.select import target_of

    rows: list[RunRow] = []
    async with runtime_session(project, role=None, socket=socket) as session:
        params: dict[str, Any] = {"stored": True}
        while True:  # one page per request, each bounded, until the last
            reply = await session.call("runs/list", params)
            rows.extend(row_from_dict(row) for row in reply["runs"])
            following = reply.get("next")
            if not isinstance(following, str):
                break
            params["after"] = following
    return rows, target_of(reply["state"])


@app.command("resume", cls=HelpCommand)
def resume(
    run_id: Annotated[
        str,
        Argument(metavar="RUN_ID", help="The stored run to continue (see membrane runs)."),
    ],
    message: Annotated[
        str, Argument(metavar="MESSAGE", help="The next user message of its conversation.")
    ],
    model: Annotated[str | None, Option(help=MODEL_HELP)] = None,
    project: Annotated[Path, Option(help="The project folder.")] = Path("."),
    workspace: Annotated[Path | None, Option(help="The workspace folder.")] = None,
    as_json: Annotated[bool, Option("--json", help="One JSON event per line.")] = False,
    state: Annotated[str | None, STATE_OPTION] = None,
    headless: Annotated[bool, HEADLESS_OPTION] = False,
    socket: Annotated[Path | None, SOCKET_OPTION] = None,
) -> None:
    """Continue the stored run RUN_ID with MESSAGE under the same id; stream and print it as
    membrane run does, runtime-backed or in this process by the same rule.

    The run keeps its stored conversation and durable depth, and takes the completion notices
    still owed to it. Every project extension is imported, so resume only trusted projects.
    """
    import anyio

    from membrane.cli.backend import runtime_backed
    from membrane.cli.follow import drive_run, run_on_runtime
    from membrane.cli.model_choice import absolute_spec, parse_model
    from membrane.workspace import Workspace

    local_only = state is not None or workspace is not None
    if runtime_backed(headless=headless, local_only=local_only):
        params: dict[str, Any] = {"runId": run_id, "message": message}
        spec = absolute_spec(model)
        if spec is not None:
            params["model"] = spec
        outcome = anyio.run(
            lambda: run_on_runtime(project, "runs/resume", params, socket=socket, as_json=as_json)
        )
        if outcome is not None and not outcome.ok:
            raise Exit(EXIT_RUN)
        return
    ws = Workspace.open(project, workspace=workspace)
    chosen = parse_model(model, ws.settings)
    path = existing_state(ws.project, state, home=ws.home)
    if not state_exists(path):
        raise UnknownRun(
            f"no run {run_id!r} to resume: {path} does not exist; membrane run stores runs there",
            run_id=run_id,
            path=str(path),
        )

    async def start(runtime: SubagentRuntime) -> RunInfo:
        return await runtime.resume(run_id, message)

    result = anyio.run(lambda: drive_run(ws, start, model=chosen, as_json=as_json, state_file=path))
    if not result.ok:
        raise Exit(EXIT_RUN)


_UNITS = {"d": 1.0, "h": 1 / 24, "m": 1 / 1440, "s": 1 / 86_400}


def _days(text: str, *, option: str) -> float:
    """``30d``, ``12h``, ``90m``, ``3600s`` or a plain number of days, in days."""
    value = text.strip().lower()
    unit = _UNITS.get(value[-1:])
    number = value[:-1] if unit is not None else value
    try:
        days = float(number) * (unit if unit is not None else 1.0)
    except ValueError:
        days = -1.0
    if not days > 0 or days == float("inf"):
        raise InvalidRequest(
            f"{option} {text!r} is not a duration: write a positive number of days, or one with "
            "a unit (30d, 12h, 90m, 3600s)",
            field=option.lstrip("-"),
        )
    return days


@runs_app.command("prune", cls=HelpCommand)
def prune(
    older_than: Annotated[
        str | None,
        Option(
            "--older-than",
            help="Delete finished runs that ended longer ago than this (30d, 12h, 90m, 3600s; "
            "a plain number is days). Default: the settings' [retention].",
        ),
    ] = None,
    status: Annotated[
        list[str] | None,
        Option("--status", help="Only runs that ended with this status (repeatable)."),
    ] = None,
    keep: Annotated[
        int | None, Option("--keep", help="Keep only the newest N finished runs.")
    ] = None,
    summary: Annotated[
        bool,
        Option("--summary", help="Keep each pruned run's header and lineage edge as a summary."),
    ] = False,
    project: Annotated[Path, Option(help="The project folder.")] = Path("."),
    as_json: Annotated[
        bool, Option("--json", help="Print one JSON document: the state file and what went.")
    ] = False,
    state_file: Annotated[str | None, STATE_OPTION] = None,
) -> None:
    """Delete finished runs from the project's store with their events, transcripts, delivered
    notices, completed receipts, dead letters and lineage, then give the space back to the file
    system. A run still referenced is kept: one whose parent or child has not finished, one an
    undelivered notice is owed to or is about. With neither --older-than nor --keep the
    settings' [retention] says what goes."""
    from membrane.config.load import load_settings
    from membrane.config.values import Retention
    from membrane.store.base import PruneReport
    from membrane.store.sqlite import SQLiteStore
    from membrane.vocabulary import FINISHED_STATES

    state = existing_state(project, state_file)
    if older_than is None and keep is None:
        retention = load_settings(project=project.resolve()).retention
        if not retention.enabled:
            raise InvalidRequest(
                "nothing to prune by: give --older-than or --keep, or set [retention] in the "
                "settings (see docs/durability.md)",
                field="older-than",
            )
    else:
        statuses = status or sorted(FINISHED_STATES)
        unknown = sorted(set(statuses) - FINISHED_STATES)
        if unknown:
            raise InvalidRequest(
                f"--status {', '.join(unknown)}: not a finished status (statuses: "
                f"{', '.join(sorted(FINISHED_STATES))})",
                field="status",
            )
        if keep is not None and keep < 0:
            raise InvalidRequest("--keep must be 0 or more", field="keep")
        days = None if older_than is None else _days(older_than, option="--older-than")
        retention = Retention(
            runs_days={} if days is None else dict.fromkeys(statuses, days),
            keep_runs=keep,
            lineage="summary" if summary else "delete",
        )
    if isinstance(state, str):
        from membrane.store.postgres import PostgresStore

        with PostgresStore(state, min_size=0, max_size=1) as database:
            report = database.prune(retention)
    elif not state.exists():
        report = PruneReport()
    else:
        store = SQLiteStore(state)
        try:
            report = store.prune(retention)
        finally:
            store.close()
    if as_json:
        done = {"state": str(state), "pruned": report.to_dict()}
        sys.stdout.write(json.dumps(done, ensure_ascii=False) + "\n")
        sys.stdout.flush()
        return
    Screen().line(
        f"pruned {report.sessions} runs from {state} ({report.events} events, "
        f"{report.messages} messages, {report.outbox} delivered notices, {report.receipts} "
        f"receipts, {report.dead_letters} dead letters, {report.lineage_edges} lineage edges); "
        f"{report.freed_bytes} bytes given back"
    )
