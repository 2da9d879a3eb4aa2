"""``membrane run AGENT TASK``: run an agent and its children, showing the delegation live."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import anyio

from membrane.cli.app import EXIT_RUN, app
from membrane.cli.approve import TerminalApprover, terminal_approver
from membrane.cli.backend import RunFollower, requested_role, runtime_backed, runtime_session
from membrane.cli.declare import Argument, Exit, Option, echo
from membrane.cli.model_choice import absolute_spec, parse_model
from membrane.cli.screen import Node, Screen, Styled, rich_tree
from membrane.config.budget import Budget
from membrane.errors import Interrupted, InvalidRequest, RunError
from membrane.extensions.hooks import ExtensionHooks
from membrane.mcp.mount import McpServers
from membrane.models.base import Model
from membrane.models.wire_log import REQUESTS_FOLDER
from membrane.runtime import (
    InProcessProvider,
    LifecycleEvent,
    RunInfo,
    RunResult,
    RuntimeOptions,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.runtime.events import TERMINAL_KINDS
from membrane.workflow.planning import builtin_workflows
from membrane.workspace import Workspace

if TYPE_CHECKING:
    from rich.live import Live

__all__ = [
    "HEADLESS_OPTION",
    "MODEL_HELP",
    "SOCKET_OPTION",
    "STATE_OPTION",
    "RunState",
    "Starter",
    "drive_run",
    "follow_run",
    "parse_model",
    "report_run",
    "run",
    "run_on_runtime",
]

MODEL_HELP = (
    "scripted:PATH, openai:MODEL, anthropic:MODEL, or a [models]/[model_aliases] name "
    "(default: the default_model setting, else the agent's own model:)."
)

#: ``--headless``: this process; no machine runtime is used or started.
HEADLESS_OPTION = Option(
    "--headless",
    help="Run in this process: no machine runtime (membrane serve) is used or started.",
)
#: ``--socket PATH``: the machine runtime to use.
SOCKET_OPTION = Option("--socket", help="The machine runtime's socket (default: $MEMBRANE_SOCKET).")
#: ``--role``: the trusted role the run's view is narrowed by (the owner's choice).
ROLE_OPTION = Option(
    "--role",
    help="Run under this role of the settings (default: $MEMBRANE_ROLE, else the runtime's "
    "owner role, else your own authority).",
)

#: ``--state PATH``: the store file to use instead of the project's default one.
BUDGET_HELP = (
    "What the run and its whole subtree may spend, e.g. tokens=200000,children=20,seconds=900 "
    "(kinds: tokens, turns, tool_calls, children, seconds); within the settings' [budget]."
)
STATE_OPTION = Option(
    "--state",
    help="The state file (default: $MEMBRANE_HOME/projects/<project-id>/state.db).",
)

_STATUS_STYLE = {
    "running": "yellow",
    "queued": "dim",
    "completed": "green",
    "steered": "green",
    "stopped": "magenta",
    "aborted": "red",
    "error": "bold red",
}


@dataclass
class _Node:
    run_id: str
    agent: str
    parent_id: str | None
    depth: int = 0
    status: str = "running"
    turn: int = 0
    last_call: str = ""
    tools: tuple[str, ...] = ()
    vetoed: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    text: str = ""
    error: str = ""
    #: How the agent type was dispatched when it was not an exact match (e.g. a fallback).
    note: str = ""
    #: Token counts from the run's ``usage`` events, then from its result (own and subtree).
    usage: dict[str, int] = field(default_factory=dict)
    usage_total: dict[str, int] = field(default_factory=dict)
    #: What the run could spend when it started: the budget in force (DESIGN rule 12).
    budget: dict[str, Any] = field(default_factory=dict)
    #: An isolated child's worktree outcome (``{branch, commit, has_changes}``) from its end.
    worktree: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunState:
    """The delegation tree as the run's events describe it; nothing here is invented."""

    nodes: dict[str, _Node] = field(default_factory=dict)

    def apply(self, event: LifecycleEvent) -> None:
        data = event.data
        if event.kind == "published":
            self.nodes[event.run_id] = _Node(
                run_id=event.run_id,
                agent=event.agent,
                parent_id=event.parent_id,
                depth=int(data.get("depth", 0)),
                tools=tuple(data.get("tools", ())),
                note=str(data.get("note") or ""),
                budget=dict(data.get("budget") or {}),
            )
            return
        node = self.nodes.get(event.run_id)
        if node is None:
            return
        if event.kind == "turn":
            node.turn = int(data.get("turn", node.turn))
        elif event.kind == "tool_call":
            node.last_call = str(data.get("name", ""))
        elif event.kind == "vetoed_call":
            role = f", role {data['role']}" if data.get("role") else ""
            node.vetoed.append(f"{data.get('name')} ({data.get('code')}{role})")
        elif event.kind == "tool_result" and data.get("is_error") and data.get("name") == "Task":
            node.rejected.append(str(data.get("code")))
        elif event.kind == "usage":
            for key in ("input_tokens", "output_tokens"):
                node.usage[key] = node.usage.get(key, 0) + int(data.get(key, 0))
        elif event.kind in TERMINAL_KINDS:
            for name in ("usage", "usage_total"):
                if isinstance(data.get(name), dict):
                    setattr(node, name, dict(data[name]))
            node.status = str(data.get("status", event.kind))
            node.text = str(data.get("text", ""))
            if isinstance(data.get("worktree"), dict):
                node.worktree = dict(data["worktree"])
            error = data.get("error")
            if isinstance(error, dict):
                node.error = f"{error.get('code')}: {error.get('message')}"

    def tree(self, *, summary: bool = False) -> Node:
        root = Node((Styled("delegation", "bold"),))
        branches: dict[str | None, Node] = {None: root}
        for node in self.nodes.values():
            parent = branches.get(node.parent_id, root)
            branches[node.run_id] = parent.add(*self._label(node, summary=summary))
        return root

    def _label(self, node: _Node, *, summary: bool) -> list[Styled]:
        label = [
            Styled(node.agent, "bold"),
            Styled(f" {node.run_id} ", "dim"),
            Styled(node.status, _STATUS_STYLE.get(node.status, "")),
            Styled(f"  turn {node.turn}", ""),
        ]
        if node.last_call and not summary:
            label.append(Styled(f"  last call {node.last_call}", "cyan"))
        if summary:
            label.append(Styled(f"\n  tools: {', '.join(node.tools) or 'none'}", "dim"))
        for vetoed in node.vetoed:
            label.append(Styled(f"\n  vetoed: {vetoed}", "red"))
        for code in node.rejected:
            # A child that started and then failed is not a rejected start.
            what = "failed child" if code == "child-failed" else "rejected start"
            label.append(Styled(f"\n  {what}: {code}", "red"))
        return label


def _usage_line(node: _Node) -> str:
    own, total = node.usage, node.usage_total or node.usage
    line = f"usage: {own.get('input_tokens', 0)} in, {own.get('output_tokens', 0)} out"
    if total != own:
        line += f"; with its children {total.get('input_tokens', 0)} in, "
        line += f"{total.get('output_tokens', 0)} out"
    return line


def _print_json(payload: dict[str, Any], *, stream: TextIO | None = None) -> None:
    out = sys.stdout if stream is None else stream
    out.write(json.dumps(payload, ensure_ascii=False, default=str) + "\n")
    out.flush()


async def _stream_until_done(
    stream: AsyncIterator[LifecycleEvent],
    state: RunState,
    info: RunInfo,
    live: Live | None,
    *,
    as_json: bool,
) -> bool:
    """Show the run's events until it ends; ``True`` when Ctrl-C came first."""
    interrupted = False
    async with anyio.create_task_group() as group:

        async def on_interrupt() -> None:
            nonlocal interrupted
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                async for _ in signals:
                    interrupted = True
                    group.cancel_scope.cancel()
                    return

        group.start_soon(on_interrupt)
        async for event in stream:
            state.apply(event)
            if as_json:
                _print_json(event.to_dict())
            elif live is not None:
                live.update(rich_tree(state.tree()))
            if event.run_id == info.run_id and event.kind in TERMINAL_KINDS:
                break
        group.cancel_scope.cancel()
    return interrupted


#: Starts (or resumes) the top-level run on the opened runtime; returns once it is published.
Starter = Callable[[SubagentRuntime], Awaitable[RunInfo]]


def _no_announcement(info: RunInfo) -> str | None:
    return None


async def follow_run(
    follower: RunFollower,
    start: Callable[[], Awaitable[RunInfo]],
    *,
    as_json: bool,
    announce: Callable[[RunInfo], str | None] = _no_announcement,
    approver: TerminalApprover | None = None,
) -> tuple[RunState, RunInfo, RunResult, bool]:
    """``start`` the run, show its tree until it ends (``--json``: every event) and return the
    tree, the run, its result and whether Ctrl-C stopped it. ``approver`` pauses the live tree
    while it asks."""
    screen = Screen()
    state = RunState()
    info = await start()
    line = announce(info)
    if line is not None and not as_json:
        screen.line(line)
    live: Live | None = None
    if screen.is_terminal and not as_json:
        # The live tree is for a terminal; piped, only the report at the end is printed.
        from rich.console import Console
        from rich.live import Live

        live = Live(rich_tree(state.tree()), console=Console(), transient=True)
    if approver is not None:
        approver.live = live
    with live if live is not None else contextlib.nullcontext():
        interrupted = await _stream_until_done(follower.stream, state, info, live, as_json=as_json)
    if interrupted:
        # Ctrl-C: stop the run (its children with it) before anything else is printed.
        with anyio.CancelScope(shield=True):
            await follower.stop(info.run_id)
            result = await follower.wait(info.run_id)
    else:
        result = await follower.wait(info.run_id)
    return state, info, result, interrupted


async def drive_run(
    ws: Workspace,
    start: Starter,
    *,
    model: Model,
    as_json: bool,
    announce: Callable[[RunInfo], str | None] = _no_announcement,
    state_file: Path | None = None,
) -> RunResult:
    """Open ``ws``'s store and a runtime in this process, ``start`` the top-level run, stream
    its tree until it ends, and print its results (``--json``: every event, then the result
    line).

    ``announce`` gives a line to print, in text mode, once the run is published.
    ``state_file`` overrides where the store lives (``--state``).
    """
    store = ws.open_store(state_file)
    hooks = ExtensionHooks.from_extensions(ws.extensions.values())
    servers = McpServers.of(ws)
    provider = InProcessProvider(model, hooks=hooks)
    # On a terminal, an `ask` rule's call is put to the user; otherwise no one can approve it.
    approver = terminal_approver()
    options = RuntimeOptions(workflows=builtin_workflows(), approver=approver)
    runtime = SubagentRuntime.on_workspace(ws, provider, store=store, options=options)
    try:
        async with servers, runtime, runtime.events() as stream:
            servers.hooks(ws.catalog.definitions, into=hooks)
            follower = RunFollower(stream=stream, stop=runtime.stop, wait=runtime.wait)
            followed = await follow_run(
                follower,
                lambda: start(runtime),
                as_json=as_json,
                announce=announce,
                approver=approver,
            )
            if not followed[3]:
                await _end_left_running(follower, followed[0])
    finally:
        store.close()
        close = getattr(model, "aclose", None)
        if close is not None:
            await close()
    return report_run(*followed, project=ws.project, warnings=ws.warnings, as_json=as_json)


async def _end_left_running(follower: RunFollower, state: RunState) -> None:
    """Stop the runs the top-level run left going (its background children, which closing the
    runtime stops anyway) and record how each really ended, so the report never calls a run
    ``running`` that is over."""
    for node in list(state.nodes.values()):
        if node.status not in ("running", "queued"):
            continue
        await follower.stop(node.run_id)
        ended = await follower.wait(node.run_id)
        node.status, node.text = ended.status, ended.text
        if ended.error is not None and not node.error:
            node.error = f"{ended.error.get('code')}: {ended.error.get('message')}"


def report_run(
    state: RunState,
    info: RunInfo,
    result: RunResult,
    interrupted: bool,
    *,
    project: Path,
    warnings: Sequence[str],
    as_json: bool,
) -> RunResult:
    """Print how the followed run ended: the one formatter of both modes."""
    screen, errors = Screen(), Screen(err=True)
    if interrupted:
        # Exit 130 through the CLI's one error path (``--json``: the error object on stderr).
        stopped = [f"{n.agent} ({n.run_id})" for n in state.nodes.values()] or [info.run_id]
        resume = f'membrane resume {info.run_id} "MESSAGE" --project {project}'
        raise Interrupted(
            f"stopped {', '.join(stopped)}. Resume it with: {resume}",
            run_id=info.run_id,
            stopped=stopped,
            resume=resume,
        )
    root = state.nodes.get(result.run_id)
    if root is not None and result.error is not None and not root.error:
        root.error = f"{result.error.get('code')}: {result.error.get('message')}"
    if not result.ok and as_json and isinstance(result.error, dict):
        # The run's failure is an error like any other: the error object on stderr (exit 3).
        _print_json({"error": dict(result.error), "exit_code": EXIT_RUN}, stream=sys.stderr)
    elif not result.ok and not as_json:
        # ... as ``code: message`` without --json (with it, the result line says how it ended).
        failure = root.error if root is not None and root.error else f"run {result.status}"
        errors.line(f"{result.agent} {result.run_id}: {failure}")
    if as_json:
        # stdout holds only JSON lines; what was skipped still reaches the user, on stderr, each
        # warning one line ``{"warning": {code, message, file, line}}`` (file: the project).
        from membrane.resolve.warnings import warning_objects

        for found in warning_objects(warnings, (), file=str(project)):
            _print_json({"warning": found}, stream=sys.stderr)
        _print_json({"kind": "result", **result.to_dict()})
        return result
    for warning in warnings:
        screen.line(f"warning: {warning}", style="yellow")
    for node in state.nodes.values():
        screen.line(f"{node.agent} ({node.run_id}) {node.status}", style="bold")
        if node.note:
            screen.line(f"note: {node.note}", style="yellow")
        if node.worktree:
            screen.line(_worktree_line(node.worktree))
        screen.line(node.text or "(no text)")
        if node.usage or node.usage_total:
            screen.line(_usage_line(node), style="dim")
        if node.budget:
            left = ", ".join(f"{kind}={value}" for kind, value in node.budget.items())
            screen.line(f"budget in force at its start: {left}", style="dim")
        if node.error:
            screen.line(node.error, style="red")
        screen.line()
    screen.line("Who spawned whom", style="bold")
    screen.tree(state.tree(summary=True))
    return result


async def run_on_runtime(
    project: Path,
    method: str,
    params: dict[str, Any],
    *,
    socket: Path | None,
    as_json: bool,
    background: bool = False,
    role: str | None = None,
) -> RunResult | None:
    """Start (``runs/start``) or resume (``runs/resume``) a run on the machine runtime and show
    it with the formatters of the in-process path; ``background``: print its id and return
    (``None``), the runtime keeps it going."""
    # On a terminal, the runtime puts an `ask` rule's call to the user here, as in process.
    approver = None if background else terminal_approver()
    async with runtime_session(project, role=role, socket=socket, approver=approver) as session:
        if background:
            run = (await session.call(method, params))["run"]
            pid = (session.runtime_info or {}).get("pid")
            if as_json:
                # One shape in both modes: ``pid`` is the process that runs it (here the
                # runtime), ``log`` where its output goes (the runtime keeps none).
                _print_json({"kind": "started", **run, "pid": pid, "log": None})
            else:
                echo(
                    f"started {run.get('agent')} as run {run.get('run_id')} in the background "
                    f"(runtime pid {pid}); membrane runs shows it"
                )
            return None
        follower, start = await session.follow(method, params)
        followed = await follow_run(follower, start, as_json=as_json, approver=approver)
    return report_run(
        *followed, project=session.project, warnings=session.warnings, as_json=as_json
    )


def _permission_mode(value: str) -> str:
    """``--permission-mode`` as one of the modes (any case); ``invalid-request`` otherwise."""
    from membrane.tools.rules import PERMISSION_MODES

    for mode in PERMISSION_MODES:
        if value.lower() == mode.lower():
            return mode
    raise InvalidRequest(
        f"--permission-mode {value!r} is not a permission mode ({', '.join(PERMISSION_MODES)})",
        field="permission_mode",
    )


def _worktree_line(worktree: dict[str, Any]) -> str:
    """Where an isolated child's work is: its branch, and whether it changed anything."""
    branch = worktree.get("branch")
    if not branch:
        return f"worktree: no branch ({worktree.get('error') or 'the run made none'})"
    if worktree.get("has_changes"):
        return f"worktree branch {branch} (with changes)"
    return f"worktree branch {branch} (no changes)"


@app.command("run")
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
    state: Annotated[Path | None, STATE_OPTION] = None,
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
    state_file = state.resolve() if state is not None else ws.state_path
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
        if state is not None:
            argv += ["--state", str(state.resolve())]
        if budget is not None:
            argv += ["--budget", budget]
        if log_requests:
            argv.append("--log-requests")
        if role is not None:
            argv += ["--role", role]
        if mode is not None:
            argv += ["--permission-mode", mode]
        _detach(ws, argv, as_json=as_json, state=state)
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
            ws, start, model=chosen, as_json=as_json, announce=announce, state_file=state
        )
    )
    if not result.ok:
        raise Exit(EXIT_RUN)


def _detach(ws: Workspace, argv: list[str], *, as_json: bool, state: Path | None) -> None:
    """Start this same command again as a process of its own (a new session, so Ctrl-C and
    the terminal closing do not reach it), wait until its run is published, print the run id
    and return; the run's own output goes to a log file beside the state file."""
    state_file = state if state is not None else ws.state_path
    logs = state_file.parent / "logs"
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
        _print_json({"kind": "started", **info, "pid": child.pid, "log": str(log)})
        return
    echo(
        f"started {info.get('agent')} as run {info.get('run_id')} in the background "
        f"(pid {child.pid}, log {log}); membrane runs shows it"
    )
