"""Following a run wherever it runs, and reporting it: the live delegation tree on a terminal,
JSON Lines with ``--json``, and the results at the end (``membrane run`` and ``membrane resume``).
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from membrane.cli.app import EXIT_RUN, echo
from membrane.cli.approve import TerminalApprover, terminal_approver
from membrane.cli.backend import RunFollower, runtime_session
from membrane.cli.screen import Node, Screen, Styled, rich_tree
from membrane.errors import Interrupted
from membrane.extensions.hooks import ExtensionHooks
from membrane.mcp.mount import McpServers
from membrane.models.base import Model
from membrane.runtime import (
    InProcessProvider,
    LifecycleEvent,
    RunInfo,
    RunResult,
    RuntimeOptions,
    SubagentRuntime,
)
from membrane.runtime.events import TERMINAL_KINDS
from membrane.workflow.planning import builtin_workflows
from membrane.workspace import Workspace

if TYPE_CHECKING:
    from rich.live import Live

__all__ = [
    "RunState",
    "Starter",
    "drive_run",
    "follow_run",
    "print_json",
    "report_run",
    "run_on_runtime",
]

_STATUS_STYLE = {
    "running": "yellow",
    "queued": "dim",
    "completed": "green",
    "wrapped_up": "green",
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


def print_json(payload: dict[str, Any], *, stream: TextIO | None = None) -> None:
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
                print_json(event.to_dict())
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
    state_file: Path | str | None = None,
) -> RunResult:
    """Open ``ws``'s store and a runtime in this process, ``start`` the top-level run, stream
    its tree until it ends, and print its results (``--json``: every event, then the result
    line).

    ``announce`` gives a line to print, in text mode, once the run is published.
    ``state_file`` overrides where the store lives (``--state``: a file or a database URL).
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
        print_json({"error": dict(result.error), "exit_code": EXIT_RUN}, stream=sys.stderr)
    elif not result.ok and not as_json:
        # ... as ``code: message`` without --json (with it, the result line says how it ended).
        failure = root.error if root is not None and root.error else f"run {result.status}"
        errors.line(f"{result.agent} {result.run_id}: {failure}")
    if as_json:
        # stdout holds only JSON lines; what was skipped still reaches the user, on stderr, each
        # warning one line ``{"warning": {code, message, file, line}}`` (file: the project).
        from membrane.resolve.warnings import warning_objects

        for found in warning_objects(warnings, (), file=str(project)):
            print_json({"warning": found}, stream=sys.stderr)
        print_json({"kind": "result", **result.to_dict()})
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
                print_json({"kind": "started", **run, "pid": pid, "log": None})
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


def _worktree_line(worktree: dict[str, Any]) -> str:
    """Where an isolated child's work is: its branch, and whether it changed anything."""
    branch = worktree.get("branch")
    if not branch:
        return f"worktree: no branch ({worktree.get('error') or 'the run made none'})"
    if worktree.get("has_changes"):
        return f"worktree branch {branch} (with changes)"
    return f"worktree branch {branch} (no changes)"
