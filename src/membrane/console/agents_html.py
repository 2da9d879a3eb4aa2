"""The Agents pages: the catalog, the editor form, the explain panel and the diff before a
save."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from membrane.agents.definition import AgentDefinition, Unset
from membrane.console.editor import CHECKED_TOOLS, DENY_CHECKS, LIST_FIELDS, budget_text, tokens
from membrane.console.html import csrf_field, e, table

__all__ = ["catalog", "editor", "explain_panel", "preview", "shown"]


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
