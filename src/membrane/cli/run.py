"""``membrane run AGENT TASK``: run an agent and its children, showing the delegation live.

What the command needs beyond its declaration is imported when it runs, so ``membrane --help``
pays for none of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from typer import Argument, Exit, Option

from membrane.cli.app import EXIT_RUN, app
from membrane.cli.helptext import HelpCommand
from membrane.cli.options import (
    BUDGET_HELP,
    HEADLESS_OPTION,
    MODEL_HELP,
    ROLE_OPTION,
    SOCKET_OPTION,
    STATE_OPTION,
)

if TYPE_CHECKING:
    from membrane.workspace import Workspace

__all__ = ["run"]


@app.command("run", cls=HelpCommand)
def run(
    agent: Annotated[
        str, Argument(metavar="AGENT", help="The agent type, as the catalog dispatches it.")
    ],
    task: Annotated[str, Argument(metavar="TASK", help="The task for the agent.")],
    model: Annotated[str | None, Option(help=MODEL_HELP)] = None,
    project: Annotated[Path, Option(help="The project folder.")] = Path("."),
    workspace: Annotated[Path | None, Option(help="The workspace folder.")] = None,
    background: Annotated[bool, Option("--background", help="Start as a background run.")] = False,
    as_json: Annotated[bool, Option("--json", help="One JSON event per line.")] = False,
    state: Annotated[str | None, STATE_OPTION] = None,
    budget: Annotated[str | None, Option(help=BUDGET_HELP)] = None,
    log_requests: Annotated[
        bool,
        Option(
            "--log-requests",
            help="Log each model request and response (keys redacted) beside the run's state; "
            "membrane show RUN_ID --requests prints them.",
        ),
    ] = False,
    headless: Annotated[bool, HEADLESS_OPTION] = False,
    socket: Annotated[Path | None, SOCKET_OPTION] = None,
    role: Annotated[str | None, ROLE_OPTION] = None,
    permission_mode: Annotated[
        str | None,
        Option(
            "--permission-mode",
            metavar="MODE",
            help="The session's permission mode (default, acceptEdits, plan, dontAsk, "
            "bypassPermissions), as Claude Code's flag sets it; the run goes on in this process.",
        ),
    ] = None,
    announce_fd: Annotated[int | None, Option(hidden=True)] = None,
) -> None:
    """Run AGENT on TASK with its children; stream the delegation tree and print the results.

    Unless told otherwise, the machine runtime (membrane serve, started in the background when
    none answers on the socket) runs it and this command follows it. With --headless
    (or MEMBRANE_HEADLESS=1), --state or --workspace, in this process; inside a run always
    through the runtime. Both print the same way.

    With --background the command returns as soon as the run has started, printing its id;
    the run goes on in the runtime, or in a process of its own (its output in a log file next
    to the state), and membrane runs shows it. State goes to
    $MEMBRANE_HOME/projects/<project-id>/state.db (--state overrides); with --log-requests (or
    log_requests = true in the settings) each model request and response goes to requests/ beside
    it, and membrane show RUN_ID --requests prints them. Every project extension
    is imported and its setup() runs, so run only trusted projects.
    """
    import contextlib
    import dataclasses
    import json
    import os

    import anyio

    from membrane.cli.backend import requested_role, runtime_backed
    from membrane.cli.follow import drive_run, run_on_runtime
    from membrane.cli.model_choice import absolute_spec, parse_model
    from membrane.config.budget import Budget
    from membrane.errors import InvalidRequest
    from membrane.models.wire_log import REQUESTS_FOLDER
    from membrane.runtime import RunInfo, SubagentRuntime, SubagentStartRequest
    from membrane.store.select import target_of
    from membrane.workspace import Workspace

    mode = None if permission_mode is None else _permission_mode(permission_mode)
    local_only = (
        state is not None or workspace is not None or announce_fd is not None or mode is not None
    )
    if runtime_backed(headless=headless, local_only=local_only):
        params: dict[str, Any] = {"agent": agent, "task": task, "exact": True}
        spec = absolute_spec(model)
        if spec is not None:
            params["model"] = spec
        if background:
            params["background"] = True
        if budget is not None:
            params["budget"] = budget
        if log_requests:
            params["logRequests"] = True
        outcome = anyio.run(
            lambda: run_on_runtime(
                project,
                "runs/start",
                params,
                socket=socket,
                as_json=as_json,
                background=background,
                role=role,
            )
        )
        if outcome is not None and not outcome.ok:
            raise Exit(EXIT_RUN)
        return
    ws = Workspace.open(project, workspace=workspace)
    if mode is not None:  # the session's mode: the top level's, and every child's ceiling
        ws.settings = dataclasses.replace(ws.settings, permission_mode=mode)
    # A top-level run names its agent exactly: no fallback, and a broken file is not "unknown".
    definition = ws.catalog.require(agent)
    logged = log_requests or ws.settings.log_requests
    # A file given by --state keeps its logs beside it; a database keeps them in the
    # project's own state folder.
    target = None if state is None else target_of(state)
    if isinstance(target, Path):
        target = target.resolve()
    state_file = target if isinstance(target, Path) else ws.state_path
    requests = state_file.parent / REQUESTS_FOLDER if logged else None
    chosen = parse_model(model, ws.settings, agent=definition, requests=requests)
    limits = None if budget is None else Budget.parse(budget, where="--budget")
    role = requested_role(role)
    if role is not None and role not in ws.settings.roles:
        known = ", ".join(sorted(ws.settings.roles))
        raise InvalidRequest(f"unknown role {role!r}; roles in settings: {known}", field="role")
    if background and announce_fd is None:
        argv = ["run", agent, task, "--project", str(ws.project), "--background"]
        if model is not None:  # else the detached run reads default_model too
            argv += ["--model", str(model)]
        if workspace is not None:
            argv += ["--workspace", str(workspace.resolve())]
        if target is not None:
            argv += ["--state", str(target)]
        if budget is not None:
            argv += ["--budget", budget]
        if log_requests:
            argv.append("--log-requests")
        if role is not None:
            argv += ["--role", role]
        if mode is not None:
            argv += ["--permission-mode", mode]
        _detach(ws, argv, as_json=as_json, state=state_file)
        return

    async def start(runtime: SubagentRuntime) -> RunInfo:
        request = SubagentStartRequest(
            agent_type=agent, task=task, background=background, budget=limits, role=role
        )
        return await runtime.start(request)

    def announce(info: RunInfo) -> str | None:
        if announce_fd is not None:
            # The detached run tells the command that started it its id, then goes on.
            with contextlib.suppress(OSError):
                os.write(announce_fd, json.dumps(info.to_dict(), default=str).encode() + b"\n")
            with contextlib.suppress(OSError):
                os.close(announce_fd)
            return None
        if not background:
            return None
        return f"started {info.agent} as run {info.run_id} in the background"

    result = anyio.run(
        lambda: drive_run(
            ws, start, model=chosen, as_json=as_json, announce=announce, state_file=target
        )
    )
    if not result.ok:
        raise Exit(EXIT_RUN)


def _permission_mode(value: str) -> str:
    """``--permission-mode`` as one of the modes (any case); ``invalid-request`` otherwise."""
    from membrane.errors import InvalidRequest
    from membrane.tools.rules import PERMISSION_MODES

    for mode in PERMISSION_MODES:
        if value.lower() == mode.lower():
            return mode
    raise InvalidRequest(
        f"--permission-mode {value!r} is not a permission mode ({', '.join(PERMISSION_MODES)})",
        field="permission_mode",
    )


def _detach(ws: Workspace, argv: list[str], *, as_json: bool, state: Path) -> None:
    """Start this same command again as a process of its own (a new session, so Ctrl-C and
    the terminal closing do not reach it), wait until its run is published, print the run id
    and return; the run's own output goes to a log file beside the state file."""
    import json
    import os
    import subprocess
    import sys
    import time

    from membrane.cli.app import echo
    from membrane.cli.follow import print_json
    from membrane.errors import RunError

    logs = state.parent / "logs"
    logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    log = logs / f"run-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
    read_end, write_end = os.pipe()
    args = [*argv, "--announce-fd", str(write_end)]
    if "--json" not in args:
        args.append("--json")
    with open(log, "wb") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "membrane", *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            pass_fds=(write_end,),
            start_new_session=True,
        )
    os.close(write_end)
    with os.fdopen(read_end, "rb") as announced:
        line = announced.readline()
    if not line:
        child.wait()
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
        raise RunError(
            "the background run did not start: " + (" | ".join(tail) or f"exit {child.returncode}"),
            log=str(log),
        )
    info = json.loads(line)
    if as_json:
        print_json({"kind": "started", **info, "pid": child.pid, "log": str(log)})
        return
    echo(
        f"started {info.get('agent')} as run {info.get('run_id')} in the background "
        f"(pid {child.pid}, log {log}); membrane runs shows it"
    )
