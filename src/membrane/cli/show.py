"""``membrane show RUN_ID``: what one stored run did.

The run's header (agent, status, parent, depth, when), its result (text, error, usage of its
own and of its subtree, the worktree branch of an isolated child), each tool call it made with
its arguments and its result, its events in order, and the lineage below it. Tool results and
long texts are cut at ``--width`` characters unless ``--full`` is given. Only the store is read
(no extension is imported, nothing is created); ``--json`` prints the same as one document.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

from typer import Argument, Option

from membrane.cli.app import app
from membrane.cli.helptext import HelpCommand
from membrane.cli.lineage import lineage_tree
from membrane.cli.options import STATE_OPTION
from membrane.cli.runs import existing_state, money, state_exists
from membrane.cli.screen import Node, Screen
from membrane.errors import InvalidRequest, UnknownRun

if TYPE_CHECKING:
    from membrane.store.select import StateTarget

__all__ = ["run_report", "show"]

#: Characters of a tool result or a text shown before it is cut (``--full`` shows all).
WIDTH: Final = 400


def _cut(text: str, width: int | None) -> tuple[str, bool]:
    if width is None or len(text) <= width:
        return text, False
    return text[:width], True


def run_report(state: StateTarget, run_id: str, *, width: int | None = WIDTH) -> dict[str, Any]:
    """Everything ``membrane show`` prints about ``run_id``, as one JSON-ready document."""
    from membrane.runtime.listing import list_runs
    from membrane.store.select import open_reader, shown

    rows = {row.run_id: row for row in list_runs(state)}
    row = rows.get(run_id)
    if row is None:
        raise UnknownRun(
            f"no run {run_id!r} in {shown(state)}; membrane runs lists the stored runs",
            run_id=run_id,
        )
    store = open_reader(state)
    try:
        header = store.get_header(run_id)
        transcript = store.transcript(run_id)
        events = store.events(session_id=run_id)
    finally:
        store.close()
    result: Mapping[str, Any] = (header.result if header is not None else None) or {}
    text, cut = _cut(str(result.get("text") or ""), width)
    published = next((e.data for e in events if e.kind == "published"), {})
    return {
        "run": {
            **row.to_dict(),
            # The digest of its effective authority (``membrane explain --json`` prints the
            # same one for a child that runs as explained).
            "authority_digest": published.get("authority_digest"),
            "text": text,
            "text_truncated": cut,
            "error": result.get("error"),
            "worktree": result.get("worktree"),
        },
        # Each child's share of the subtree's usage and cost (its own and its subtree's).
        "children": [
            _spending(child.to_dict()) for child in rows.values() if child.parent_id == run_id
        ],
        "tool_calls": _tool_calls(transcript, width),
        "transcript": [_message(m, width) for m in transcript],
        "events": [{"seq": e.seq, "kind": e.kind, "at": e.at, "data": e.data} for e in events],
        "lineage": lineage_tree(state, run_id)[0]["children"],
    }


def _spending(row: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("run_id", "agent", "status", "usage", "usage_total", "cost", "cost_total")
    return {key: row[key] for key in keys}


def _tokens(usage: Mapping[str, Any]) -> str:
    return f"{usage['input_tokens']} in, {usage['output_tokens']} out"


def _tool_calls(transcript: list[Any], width: int | None) -> list[dict[str, Any]]:
    """Each call of the run's conversation with its arguments and the result that answered it."""
    results = {m.get("tool_call_id"): m for m in transcript if m.get("role") == "tool"}
    calls: list[dict[str, Any]] = []
    for message in transcript:
        for call in message.get("tool_calls") or ():
            answer = results.get(call.get("id"))
            content = str(answer.get("content", "")) if answer is not None else ""
            shown, cut = _cut(content, width)
            entry: dict[str, Any] = {
                "id": call.get("id"),
                "name": call.get("name"),
                "arguments": call.get("arguments"),
                "result": shown if answer is not None else None,
                "result_truncated": cut,
                "is_error": bool(answer.get("is_error")) if answer is not None else None,
            }
            if answer is not None and answer.get("is_error"):
                entry["code"] = _code(content)
            calls.append(entry)
    return calls


def _code(content: str) -> str | None:
    try:
        code = json.loads(content)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None
    return code if isinstance(code, str) else None


def _message(message: Mapping[str, Any], width: int | None) -> dict[str, Any]:
    content, cut = _cut(str(message.get("content") or ""), width)
    out = {k: v for k, v in message.items() if k != "content"}
    return {**out, "content": content, "content_truncated": cut}


def _print(report: dict[str, Any]) -> None:
    screen = Screen()
    run = report["run"]
    screen.line(f"{run['agent']} {run['run_id']} {run['status']}", style="bold")
    parent = run["parent_id"] or "-"
    screen.line(f"parent {parent}, depth {run['depth']}", style="dim")
    if run.get("authority_digest"):
        screen.line(f"authority {run['authority_digest']}", style="dim")
    worktree = run.get("worktree")
    if isinstance(worktree, Mapping):
        changes = "with changes" if worktree.get("has_changes") else "no changes"
        screen.line(f"worktree branch {worktree.get('branch')} ({changes})")
    usage, total = run["usage"], run["usage_total"]
    screen.line(f"usage: {_tokens(usage)} (subtree {_tokens(total)})", style="dim")
    screen.line(f"cost: {money(run['cost'])} (subtree {money(run['cost_total'])})", style="dim")
    if report["children"]:
        screen.rule("Spending by child")
        for child in report["children"]:
            screen.line(
                f"{child['agent']} {child['run_id']} {child['status']}: "
                f"{_tokens(child['usage'])}, {money(child['cost'])}; with its subtree "
                f"{_tokens(child['usage_total'])}, {money(child['cost_total'])}"
            )
    if run.get("error"):
        error = run["error"]
        screen.line(f"{error.get('code')}: {error.get('message')}", style="red")
    screen.rule("Tool calls")
    if not report["tool_calls"]:
        screen.line("(none)", style="dim")
    for call in report["tool_calls"]:
        arguments = json.dumps(call["arguments"], ensure_ascii=False)
        screen.line(f"{call['name']} {arguments}", style="bold")
        result = call["result"]
        style = "red" if call["is_error"] else ""
        shown = "(no result)" if result is None else result
        more = " ... (cut; --full shows all)" if call["result_truncated"] else ""
        screen.line("  -> " + shown + more, style=style)
    screen.rule("Result")
    more = " ... (cut; --full shows all)" if run["text_truncated"] else ""
    screen.line((run["text"] or "(no text)") + more)
    screen.rule("Events")
    for event in report["events"]:
        data = json.dumps(event["data"], ensure_ascii=False)
        screen.line(f"{event['seq']:>5} {event['kind']:<12} {data}")
    if report["lineage"]:
        screen.rule("Lineage below")
        tree = Node((f"{run['agent']} {run['run_id']}",))
        _grow(tree, report["lineage"])
        screen.tree(tree)


def _print_requests(state: StateTarget, run_id: str, *, folder: Path, as_json: bool) -> None:
    """The run's request log (``membrane.models.wire_log``): each request and what came back."""
    from membrane.models.wire_log import REQUESTS_FOLDER, read_requests
    from membrane.runtime.listing import list_runs

    if run_id not in {row.run_id for row in list_runs(state)}:
        raise UnknownRun(
            f"no run {run_id!r} in the state; membrane runs lists the stored runs", run_id=run_id
        )
    folder = folder / REQUESTS_FOLDER
    logged = read_requests(folder, run_id)
    if as_json:
        document = {"run_id": run_id, "log": str(folder / f"{run_id}.jsonl"), "requests": logged}
        sys.stdout.write(json.dumps(document, ensure_ascii=False) + "\n")
        return
    screen = Screen()
    if logged is None:
        screen.line(
            f"no requests were logged for {run_id}: run with --log-requests, or set "
            "log_requests = true in the settings",
            style="dim",
        )
        return
    for number, entry in enumerate(logged, start=1):
        outcome = "error" if entry.get("error") else "ok"
        screen.rule(
            f"#{number} {entry.get('model')} at {entry.get('base_url') or 'the default endpoint'}"
            f" ({entry.get('ms')} ms, {outcome})"
        )
        screen.line("request:", style="bold")
        screen.line(json.dumps(entry.get("request"), ensure_ascii=False, indent=2))
        if entry.get("error"):
            error = entry["error"]
            screen.line(f"error: {error.get('code')}: {error.get('message')}", style="red")
        else:
            screen.line("response:", style="bold")
            screen.line(json.dumps(entry.get("response"), ensure_ascii=False, indent=2))


def _grow(tree: Node, nodes: list[dict[str, Any]]) -> None:
    for node in nodes:
        edge = node.get("edge") or {}
        label = f"{node['agent']} {node['run_id']} [{edge.get('status', node['status'])}]"
        _grow(tree.add(label), node["children"])


@app.command("show", cls=HelpCommand)
def show(
    run_id: Annotated[
        str, Argument(metavar="RUN_ID", help="The stored run to show (see membrane runs).")
    ],
    project: Annotated[Path, Option(help="The project folder.")] = Path("."),
    full: Annotated[
        bool, Option("--full", help="Show tool results and texts in full, never cut.")
    ] = False,
    width: Annotated[
        int, Option(help="Cut tool results and texts at this many characters.")
    ] = WIDTH,
    as_json: Annotated[bool, Option("--json", help="Print one JSON document.")] = False,
    state_file: Annotated[str | None, STATE_OPTION] = None,
    requests: Annotated[
        bool,
        Option(
            "--requests",
            help="Print the model requests and responses logged for the run "
            "(membrane run --log-requests) instead.",
        ),
    ] = False,
) -> None:
    """Show what the stored run RUN_ID did: its result, usage and worktree branch, each tool
    call with its arguments and result, its events, and the runs it started. With --requests:
    the model requests and responses logged for it (membrane run --log-requests).

    Only the store is read; no extension is imported and no file is created.
    """
    if width < 1:
        raise InvalidRequest("--width must be at least 1", field="width")
    state = existing_state(project, state_file)
    if not state_exists(state):
        raise UnknownRun(f"no run {run_id!r}: {state} does not exist", run_id=run_id)
    if requests:
        # Beside a state file; a database's runs log them in the project's state folder.
        folder = state.parent if isinstance(state, Path) else _state_folder(project)
        _print_requests(state, run_id, folder=folder, as_json=as_json)
        return
    report = run_report(state, run_id, width=None if full else width)
    if as_json:
        sys.stdout.write(json.dumps(report, ensure_ascii=False, default=str) + "\n")
        return
    _print(report)


def _state_folder(project: Path) -> Path:
    """The project's own state folder (``$MEMBRANE_HOME/projects/<project-id>``)."""
    from membrane.config.load import membrane_home
    from membrane.store.location import locate_state

    return locate_state(project.resolve(), home=membrane_home()).path.parent
