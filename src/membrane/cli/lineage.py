"""``membrane lineage [RUN_ID]``: the delegation ledger of a project as a tree.

Each node is a stored run; each edge below it is a delegation it made, from the lineage ledger
(``lineage_edges``): the edge's status (``running``, ``completed``, ``failed`` or
``interrupted``), the child's agent, the model of its spawn fingerprint, the brief's digest
and the result summary. Without RUN_ID every root is shown (a run no edge leads to). Only the
store is read; a malformed stored edge is dropped with a warning (``membrane.store``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from typer import Argument, Option

from membrane.cli.app import app
from membrane.cli.helptext import HelpCommand
from membrane.cli.options import STATE_OPTION
from membrane.cli.runs import existing_state, state_exists
from membrane.cli.screen import Cell, Node, Screen, Styled
from membrane.errors import UnknownRun

if TYPE_CHECKING:  # for annotations; the commands import what they run
    from membrane.store.base import LineageEdge, SessionHeader
    from membrane.store.select import StateTarget

__all__ = ["lineage", "lineage_tree"]


def lineage_tree(state: StateTarget, run_id: str | None = None) -> list[dict[str, Any]]:
    """The ledger of ``state`` as nested nodes (``run_id``'s subtree, or every root)."""
    from membrane.store.select import open_reader, shown

    store = open_reader(state)
    try:
        headers = {h.session_id: h for h in store.list_sessions()}
        edges = store.edges()
    finally:
        store.close()
    children: dict[str, list[LineageEdge]] = {}
    for edge in edges:
        children.setdefault(edge.parent_id, []).append(edge)
    child_ids = {edge.child_id for edge in edges}
    if run_id is not None:
        if run_id not in headers and run_id not in children:
            raise UnknownRun(f"no run {run_id!r} in {shown(state)}", run_id=run_id)
        roots = [run_id]
    else:
        roots = [rid for rid in headers if rid not in child_ids]
        roots += [rid for rid in children if rid not in headers and rid not in child_ids]
    return [_node(rid, headers, children, None, set()) for rid in roots]


def _node(
    run_id: str,
    headers: dict[str, SessionHeader],
    children: dict[str, list[LineageEdge]],
    edge: LineageEdge | None,
    seen: set[str],
) -> dict[str, Any]:
    header = headers.get(run_id)
    node: dict[str, Any] = {
        "run_id": run_id,
        "agent": header.agent if header is not None else (edge.child_role if edge else None),
        "status": header.status if header is not None else None,
    }
    if edge is not None:
        node["edge"] = {
            "status": edge.status,
            "agent": edge.child_role,
            "model": edge.spawn_fingerprint.get("model"),
            "spawn_fingerprint": dict(edge.spawn_fingerprint),
            "brief_digest": edge.brief_digest,
            "summary": edge.result_summary,
        }
    seen = seen | {run_id}
    node["children"] = [
        _node(e.child_id, headers, children, e, seen)
        for e in children.get(run_id, [])
        if e.child_id not in seen
    ]
    return node


def _label(node: dict[str, Any]) -> list[Cell]:
    text: list[Cell] = [Styled(str(node["agent"] or "?"), "bold"), f" {node['run_id']}"]
    edge = node.get("edge")
    if edge is None:
        text.append(f" {node['status'] or '-'}")
        return text
    text.append(f" [{edge['status']}]")
    text.append(f" model={edge['model'] or '-'}")
    text.append(f" brief={edge['brief_digest'][:12]}")
    if edge["summary"]:
        summary = " ".join(str(edge["summary"]).split())
        text.append(Styled(f"\n  {summary[:120]}", "dim"))
    return text


def _grow(tree: Node, node: dict[str, Any]) -> None:
    for child in node["children"]:
        _grow(tree.add(*_label(child)), child)


@app.command("lineage", cls=HelpCommand)
def lineage(
    run_id: Annotated[
        str | None, Argument(metavar="RUN_ID", help="The run whose tree to show.")
    ] = None,
    project: Annotated[Path, Option(help="The project folder.")] = Path("."),
    as_json: Annotated[
        bool, Option("--json", help="Print one JSON document: the state file and the tree.")
    ] = False,
    state_file: Annotated[str | None, STATE_OPTION] = None,
) -> None:
    """Print the delegation tree of RUN_ID (default: every root) from the lineage ledger: each
    edge's status, agent, model, brief digest and result summary."""
    from membrane.store.select import shown

    state = existing_state(project, state_file)
    if not state_exists(state):
        if run_id is not None:
            raise UnknownRun(f"no run {run_id!r}: {state} does not exist", run_id=run_id)
        nodes: list[dict[str, Any]] = []
    else:
        nodes = lineage_tree(state, run_id)
    if as_json:
        listed = {"state": shown(state), "roots": nodes}
        sys.stdout.write(json.dumps(listed, ensure_ascii=False) + "\n")
        return
    if not nodes:
        Screen(err=True).line(f"no runs in {state}")
        return
    screen = Screen()
    for node in nodes:
        tree = Node(tuple(_label(node)))
        _grow(tree, node)
        screen.tree(tree)
