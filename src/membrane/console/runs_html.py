"""The pages over runs and the project's records: the live tree and a run's page, the inbox
(approvals and dead letters), the outbox, lineage, schedules and the doctor's report."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from membrane.console.html import csrf_field, e, table
from membrane.console.link import Approval
from membrane.console.tree import Row

__all__ = [
    "approvals",
    "dead_letters",
    "doctor",
    "gates",
    "inbox",
    "lineage",
    "outbox",
    "run_page",
    "runs",
    "schedules",
    "tree_rows",
]


def _budget(row: Row) -> str:
    if not row.budget:
        return "-"
    return ", ".join(f"{e(k)} {e(v)}" for k, v in sorted(row.budget.items()))


def tree_rows(rows: Iterable[Row]) -> str:
    """The tree's table body (swapped in live)."""
    out = []
    for row in rows:
        marks = "".join(f"<span class=veto>vetoed {e(v)}</span> " for v in row.vetoed)
        marks += "".join(
            f"<span class=veto>refused start {e(c)}</span> " for c in row.refused_starts
        )
        if row.error:
            marks += f"<span class=veto>{e(row.error)}</span>"
        indent = f'style="padding-left:{0.5 + 1.25 * row.depth:.2f}em"'
        out.append(
            f'<tr id="run-{e(row.run_id)}" data-status="{e(row.status)}">'
            f'<td {indent}><a href="/runs/{e(row.run_id)}">{e(row.agent)}</a></td>'
            f"<td class=status>{e(row.status)}</td><td>{e(row.model) or '-'}</td>"
            f"<td>{row.turn}</td><td>{row.tokens}</td><td>{row.tool_calls}</td>"
            f"<td>{row.children}</td><td>{row.seconds:.1f}</td><td>{_budget(row)}</td>"
            f"<td>{marks or '-'}</td></tr>"
        )
    return "".join(out) or "<tr><td colspan=10>No runs yet.</td></tr>"


def runs(rows: Iterable[Row], agents: Sequence[str], *, csrf: str) -> str:
    options = "".join(f'<option value="{e(a)}">{e(a)}</option>' for a in agents)
    start = (
        f'<form method=post action="/runs/start" class=inline>{csrf_field(csrf)}'
        f"<label for=f-agent>agent</label><select id=f-agent name=agent>{options}</select>"
        "<label for=f-task>task</label><input id=f-task name=task required>"
        '<label for=f-model>model</label><input id=f-model name=model placeholder="default">'
        "<button type=submit>Start</button></form>"
    )
    head = "".join(
        f"<th scope=col>{c}</th>"
        for c in (
            "agent",
            "status",
            "model",
            "turn",
            "tokens",
            "tool calls",
            "children",
            "seconds",
            "budget",
            "marks",
        )
    )
    filter_ = (
        "<label for=f-filter>filter</label><input id=f-filter type=search name=q "
        'hx-get="/runs/rows" hx-trigger="input changed delay:200ms" hx-target="#tree">'
    )
    return (
        f"<h2>Start a run</h2>{start}<h2>Delegation tree</h2>{filter_}"
        '<div hx-sse="connect:/events"><div class=scroll><table><thead>'
        f'<tr>{head}</tr></thead><tbody id=tree hx-sse="swap:tree">{tree_rows(rows)}'
        "</tbody></table></div></div>"
    )


def run_page(report: Mapping[str, Any], *, csrf: str) -> str:
    """``membrane show``: header, tool calls with arguments and results, events, lineage."""
    run = report.get("run") or {}
    run_id = str(run.get("run_id"))
    header = table(("field", "value"), ((e(k), e(v)) for k, v in run.items()))
    calls = table(
        ("tool", "arguments", "result"),
        (
            (
                e(c.get("name")),
                f"<pre>{e(json.dumps(c.get('arguments'), indent=1))}</pre>",
                f"<pre>{e(c.get('result'))}</pre>",
            )
            for c in report.get("tool_calls") or []
        ),
    )
    events = table(
        ("seq", "kind", "data"),
        (
            (e(ev.get("seq")), e(ev.get("kind")), f"<code>{e(json.dumps(ev.get('data')))}</code>")
            for ev in report.get("events") or []
        ),
    )
    act = (
        f'<form method=post action="/runs/{e(run_id)}/message" class=inline>{csrf_field(csrf)}'
        "<label for=f-msg>steer</label><input id=f-msg name=message required>"
        "<button type=submit>Send</button></form>"
        f'<form method=post action="/runs/{e(run_id)}/stop" class=inline>{csrf_field(csrf)}'
        "<button type=submit>Stop</button></form>"
        f'<form method=post action="/runs/{e(run_id)}/resume" class=inline>{csrf_field(csrf)}'
        "<label for=f-resume>resume with</label><input id=f-resume name=message required>"
        "<label for=f-resume-model>model</label>"
        '<input id=f-resume-model name=model placeholder="default">'
        "<button type=submit>Resume</button></form>"
    )
    return f"{act}<h2>Run</h2>{header}<h2>Tool calls</h2>{calls}<h2>Events</h2>{events}"


def approvals(pending: Iterable[Approval], answered: Iterable[Approval], *, csrf: str) -> str:
    items = []
    for a in pending:
        r = a.request
        items.append(
            f'<li class=approval id="approval-{a.id}"><p><strong>{e(r.agent)}</strong> '
            f"(run <code>{e(r.run_id)}</code>) asks to call <code>{e(r.tool)}</code> "
            f"<code>{e(json.dumps(dict(r.arguments)))}</code>: rule <code>{e(r.reason)}</code></p>"
            f'<form method=post action="/inbox/{a.id}">{csrf_field(csrf)}'
            f'<label for="reason-{a.id}">reason</label><input id="reason-{a.id}" name=reason>'
            "<button type=submit name=decision value=allow>Allow</button> "
            "<button type=submit name=decision value=deny>Deny</button></form></li>"
        )
    done = "".join(
        f"<li>{'allowed' if a.allow else 'denied'} <code>{e(a.request.tool)}</code> of "
        f"{e(a.request.agent)}{': ' + e(a.reason) if a.reason else ''}</li>"
        for a in answered
    )
    return (
        f"<ul class=inbox>{''.join(items) or '<li>Nothing waits for an answer.</li>'}</ul>"
        f"<h2>Answered</h2><ul>{done or '<li>none</li>'}</ul>"
    )


def inbox(body: str) -> str:
    return (
        '<div hx-sse="connect:/events">'
        f'<div id=inbox hx-sse="swap:inbox" aria-live=polite>{body}</div></div>'
    )


#: The host's answers a phase waits for, as (answer, value, button).
_QUESTIONS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "light_offer": (
        ("accept_light_plan", "", "Accept the light plan"),
        ("decline_light_plan", "", "Decline: plan in full"),
    ),
    "ready": (("approve", "", "Approve the plan"),),
}


def gates(found: Sequence[tuple[str, str, Mapping[str, Any]]], *, csrf: str) -> str:
    """The planning gates of the runs whose agent opts into a workflow: each phase, and the
    host's answers where the phase waits for one (seed 002: only the host answers)."""
    items = []
    for run_id, agent, state in found:
        phase = str(state.get("phase"))
        forms = "".join(
            f'<form method=post action="/gates/{e(run_id)}" class=inline>{csrf_field(csrf)}'
            f'<input type=hidden name=answer value="{e(answer)}">'
            + (f'<input type=hidden name=value value="{e(value)}">' if value else "")
            + f"<button type=submit>{e(label)}</button></form>"
            for answer, value, label in _QUESTIONS.get(phase, ())
        )
        items.append(
            f'<li><a href="/runs/{e(run_id)}">{e(agent)}</a> <code>{e(run_id)}</code>: '
            f"phase <strong class=phase>{e(phase)}</strong>{forms}</li>"
        )
    listing = f"<ul>{''.join(items)}</ul>" if items else "<p>No run has a planning gate.</p>"
    return f"<h2>Planning gates</h2>{listing}"


def dead_letters(items: Sequence[Mapping[str, Any]], *, csrf: str) -> str:
    """The outbox's dead letters, each with a form that queues it again."""
    rows = (
        (
            e(item.get("id")),
            e(item.get("kind")),
            f"<code>{e(item.get('recipient'))}</code>",
            e(item.get("attempts")),
            e(item.get("last_error") or "-"),
            f'<form method=post action="/outbox/{e(item.get("id"))}/retry">{csrf_field(csrf)}'
            "<button type=submit>Retry</button></form>",
        )
        for item in items
    )
    listing = table(("id", "kind", "recipient", "attempts", "last error", ""), rows)
    return f"<h2>Dead letters</h2>{listing if items else '<p>No dead letters.</p>'}"


def outbox(items: Sequence[Mapping[str, Any]]) -> str:
    rows = (
        (
            e(item.get("id")),
            e(item.get("kind")),
            f"<code>{e(item.get('recipient'))}</code>",
            e(item.get("attempts")),
            e(item.get("last_error") or "-"),
        )
        for item in items
    )
    listing = table(("id", "kind", "recipient", "attempts", "last error"), rows)
    note = "<p>Deliveries owed to runs; dead letters are in the Inbox.</p>"
    return note + (listing if items else "<p>Nothing is waiting for delivery.</p>")


def _lineage_node(node: Mapping[str, Any]) -> str:
    edge = node.get("edge") or {}
    model = f", model {e(edge.get('model'))}" if edge.get("model") else ""
    children = "".join(_lineage_node(child) for child in node.get("children") or [])
    below = f"<ul>{children}</ul>" if children else ""
    return (
        f'<li><a href="/runs/{e(node.get("run_id"))}">{e(node.get("agent"))}</a> '
        f"<code>{e(node.get('run_id'))}</code> {e(node.get('status'))}{model}{below}</li>"
    )


def lineage(roots: Sequence[Mapping[str, Any]]) -> str:
    items = "".join(_lineage_node(root) for root in roots)
    return f"<ul class=lineage>{items}</ul>" if items else "<p>No runs in the ledger yet.</p>"


def schedules(found: Sequence[Mapping[str, Any]]) -> str:
    rows = (
        (
            f"<code>{e(s.get('schedule_id'))}</code>",
            e(s.get("agent")),
            e(s.get("task")),
            e(s.get("cron") or s.get("kind")),
            e(s.get("next_run_local") or s.get("next_due")),
            e(s.get("role") or "-"),
        )
        for s in found
    )
    listing = table(("id", "agent", "task", "when", "next run", "role"), rows)
    note = (
        "<p>Schedules fire while a runtime is up; add them with "
        "<code>membrane schedule add</code>.</p>"
    )
    return note + (listing if found else "<p>No schedules.</p>")


def doctor(report: Mapping[str, Any]) -> str:
    sections = "".join(
        f"<h2>{e(key)}</h2><pre>{e(json.dumps(value, indent=2, default=str))}</pre>"
        for key, value in report.items()
    )
    return sections or "<p>Nothing to report.</p>"
