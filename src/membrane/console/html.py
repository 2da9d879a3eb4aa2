"""The console's pages as HTML text: one layout, then one function per page or fragment.

Plain server-rendered HTML that works without JavaScript (every action is a form); htmx, the
one script, re-resolves the explain panel as the editor changes and swaps the live tree and
inbox in from the page's server-sent events. Every value is escaped here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from membrane.agents.definition import AgentDefinition, Unset
from membrane.console.editor import CHECKED_TOOLS, DENY_CHECKS, LIST_FIELDS, budget_text, tokens
from membrane.console.link import Approval
from membrane.console.tree import Row

__all__ = ["page"]

_NAV = (
    ("agents", "/agents", "Agents"),
    ("runs", "/runs", "Runs"),
    ("inbox", "/inbox", "Inbox"),
    ("lineage", "/lineage", "Lineage"),
    ("schedules", "/schedules", "Schedules"),
    ("outbox", "/outbox", "Outbox"),
    ("doctor", "/doctor", "Doctor"),
)


def e(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def page(
    title: str, body: str, *, csrf: str, active: str, role: str | None, may_write: bool
) -> str:
    """A whole page: the navigation, the role the console acts with, and ``body``."""
    nav = "".join(
        f'<a href="{href}"{" aria-current=page" if key == active else ""}>{label}</a>'
        for key, href, label in _NAV
    )
    rights = "may write" if may_write else "read-only"
    headers = e(json.dumps({"X-CSRF-Token": csrf}))
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{e(title)} · Membrane console</title>"
        '<link rel=stylesheet href="/static/console.css">'
        '<script src="/static/htmx.min.js" defer></script></head>'
        f"<body hx-headers='{headers}'>"
        f'<header><strong>Membrane</strong><nav aria-label="Console pages">{nav}</nav>'
        f"<span class=role>role: {e(role or 'owner')} ({rights})</span></header>"
        f"<main><h1>{e(title)}</h1>{body}</main></body></html>"
    )


def csrf_field(csrf: str) -> str:
    return f'<input type=hidden name=csrf value="{e(csrf)}">'


def table(columns: Sequence[str], rows: Iterable[Sequence[str]], *, caption: str = "") -> str:
    head = "".join(f"<th scope=col>{e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    cap = f"<caption>{e(caption)}</caption>" if caption else ""
    return (
        f"<div class=scroll><table>{cap}<thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table></div>"
    )


def error_box(code: str, message: str) -> str:
    return f"<p class=error role=alert><code>{e(code)}</code> {e(message)}</p>"


# -- agents -----------------------------------------------------------------------------


def shown(text: str, project: Path) -> str:
    """``text`` with the project's folder left out of the paths it names (they are shown
    relative to the project, as the page's header names it)."""
    return text.replace(f"{project}{os.sep}", "")


def catalog(
    winners: Mapping[str, AgentDefinition],
    shadowed: Mapping[str, Sequence[AgentDefinition]],
    problems: Sequence[str],
    *,
    project: Path,
) -> str:
    rows = []
    for name, d in winners.items():
        editable = d.dialect == "membrane" and not d.builtin
        link = f'<a href="/agents/{e(name)}">{e(name)}</a>' if editable else e(name)
        shadows = "<br>".join(
            f"{e(s.root)}: {e(shown(s.path, project))}" for s in shadowed.get(name, [])
        )
        warnings = "<br>".join(e(shown(str(w), project)) for w in d.warnings)
        rows.append(
            (
                link,
                e(d.root),
                e(d.dialect),
                f"<code>{e(shown(d.path, project))}</code>",
                shadows or "-",
                warnings or "-",
            )
        )
    listing = table(("name", "root", "dialect", "path", "shadows", "warnings"), rows)
    issues = "".join(f"<li><code>{e(shown(p, project))}</code></li>" for p in problems)
    tail = f"<h2>Skipped files and warnings</h2><ul>{issues}</ul>" if problems else ""
    note = (
        f"<p>Project: <code>{e(project)}</code>. Paths below are relative to it.</p>"
        "<p>Membrane-dialect files of a project, workspace or global root open in the editor; "
        "builtins and other products' files are listed as they are read.</p>"
    )
    return note + listing + tail


def _checkboxes(name: str, choices: Sequence[str], ticked: Sequence[str], legend: str) -> str:
    boxes = "".join(
        f'<label><input type=checkbox name={name} value="{e(c)}"'
        f"{' checked' if c in ticked else ''}> {e(c)}</label>"
        for c in choices
    )
    return f"<fieldset><legend>{e(legend)}</legend>{boxes}</fieldset>"


def _text(name: str, label: str, value: str, *, hint: str = "") -> str:
    help_ = f'<small id="{name}-hint">{e(hint)}</small>' if hint else ""
    described = f' aria-describedby="{name}-hint"' if hint else ""
    return (
        f'<label for="f-{name}">{e(label)}</label>'
        f'<input id="f-{name}" name={name} value="{e(value)}"{described}>{help_}'
    )


def _select(name: str, label: str, value: str, choices: Sequence[str]) -> str:
    options = "".join(
        f'<option value="{e(c)}"{" selected" if c == value else ""}>{e(c or "(not set)")}</option>'
        for c in choices
    )
    return (
        f'<label for="f-{name}">{e(label)}</label>'
        f'<select id="f-{name}" name={name}>{options}</select>'
    )


def _shown(value: object) -> str:
    return "" if isinstance(value, Unset) else str(value)


def editor(
    d: AgentDefinition, *, csrf: str, digest: str, explain_html: str, saved: bool, project: Path
) -> str:
    """The form over one definition, with the explain panel beside it."""
    tools = tokens(d.tools)
    deny = tokens(d.disallowed_tools)
    other_tools = ", ".join(t for t in tools if t not in CHECKED_TOOLS)
    other_deny = ", ".join(t for t in deny if t not in DENY_CHECKS)
    lists = "".join(
        _text(name, name, ", ".join(tokens(getattr(d, name))), hint="comma-separated")
        for name in LIST_FIELDS
        if not isinstance(getattr(d, name), bool)
    )
    notice = "<p class=ok role=status>Saved.</p>" if saved else ""
    trigger = "input delay:250ms, change"
    form = (
        f'<form id=editor method=post action="/agents/{e(d.name)}/preview" '
        f'hx-post="/agents/{e(d.name)}/explain" hx-trigger="{trigger}" hx-target="#explain" '
        f'hx-swap=innerHTML>{csrf_field(csrf)}<input type=hidden name=digest value="{e(digest)}">'
        f"<p>File: <code>{e(shown(d.path, project))}</code> ({e(d.root)} root)</p>"
        + _text("description", "description", _shown(d.description))
        + _text(
            "model", "model", _shown(d.model), hint="a model spec or alias; inherit: the parent's"
        )
        + _checkboxes("tools", CHECKED_TOOLS, tools, "tools (none ticked: the read-only default)")
        + _text(
            "tools_other",
            "other tool selectors",
            other_tools,
            hint="ext:NAME, mcp__SERVER__TOOL, Bash(git log:*) ...",
        )
        + _checkboxes("deny", DENY_CHECKS, deny, "disallowed_tools (always wins)")
        + _text("deny_other", "other denied selectors", other_deny)
        + lists
        + _text("isolation", "isolation", _shown(d.isolation), hint="off or worktree")
        + _text("permission", "permission", _shown(d.permission))
        + _text("max_turns", "max_turns", _shown(d.max_turns))
        + _text("budget", "budget", budget_text(d.budget), hint="tokens=200000, children=20, ...")
        + _select("network", "network", _shown(d.network).lower(), ("", "true", "false"))
        + '<label for="f-body">prompt body</label>'
        f'<textarea id="f-body" name=body rows=10>{e(d.body.strip())}</textarea>'
        "<button type=submit>Review changes</button></form>"
    )
    return (
        f'{notice}<div class=split><section aria-label="Definition">{form}</section>'
        f'<section aria-label="Explain" aria-live=polite><h2>Explain</h2>'
        f"<div id=explain>{explain_html}</div></section></div>"
    )


def explain_panel(payload: Mapping[str, Any]) -> str:
    """What the child would get: callable and left-out tools with reasons, each field's
    source, the warnings and the rendered system prompt (``membrane explain --json``)."""
    tools = payload.get("tools") or {}
    callable_ = "".join(f"<li><code>{e(t)}</code></li>" for t in tools.get("callable", []))
    left = table(
        ("tool", "reason"),
        ((f"<code>{e(t)}</code>", e(r)) for t, r in (tools.get("left_out") or {}).items()),
    )
    fields = table(
        ("field", "value", "source"),
        (
            (e(name), f"<code>{e(json.dumps(f.get('value')))}</code>", e(f.get("source")))
            for name, f in (payload.get("invocation") or {}).items()
        ),
    )
    warnings = "".join(f"<li>{e(w)}</li>" for w in payload.get("warnings") or [])
    prompt = (payload.get("prompt") or {}).get("system") or ""
    return (
        f"<h3>Callable tools</h3><ul id=callable class=tokens>{callable_ or '<li>none</li>'}</ul>"
        f"<h3>Left out</h3>{left}<h3>Fields and their sources</h3>{fields}"
        f"<h3>Warnings</h3><ul class=warnings>{warnings or '<li>none</li>'}</ul>"
        f"<h3>System prompt</h3><pre class=prompt>{e(prompt)}</pre>"
    )


def preview(name: str, diff: str, form: Mapping[str, Any], *, csrf: str) -> str:
    """The diff a save would write, with the same form's values to confirm it."""
    hidden = "".join(
        f'<input type=hidden name="{e(k)}" value="{e(v)}">'
        for k, values in form.items()
        if k != "csrf"
        for v in values
    )
    shown = f"<pre class=diff>{e(diff)}</pre>" if diff else "<p>No change to save.</p>"
    return (
        f'{shown}<form method=post action="/agents/{e(name)}/save">{csrf_field(csrf)}{hidden}'
        f"<button type=submit{' disabled' if not diff else ''}>Save</button> "
        f'<a href="/agents/{e(name)}">Back to the editor</a></form>'
    )


# -- runs -------------------------------------------------------------------------------


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
        "<button type=submit>Resume</button></form>"
    )
    return f"{act}<h2>Run</h2>{header}<h2>Tool calls</h2>{calls}<h2>Events</h2>{events}"


# -- inbox ------------------------------------------------------------------------------


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
    return f'<div hx-sse="connect:/events"><div id=inbox hx-sse="swap:inbox">{body}</div></div>'


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
