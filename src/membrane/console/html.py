"""The console's pages as HTML text: one layout, then one function per page or fragment.

Plain server-rendered HTML that works without JavaScript (every action is a form); htmx, the
one script, re-resolves the explain panel as the editor changes and swaps the live tree and
inbox in from the page's server-sent events. Every value is escaped here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from html import escape

__all__ = ["csrf_field", "e", "error_box", "page", "table"]

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
        f"<body hx-headers='{headers}'><a class=skip href=\"#main\">Skip to the page</a>"
        f'<header><strong>Membrane</strong><nav aria-label="Console pages">{nav}</nav>'
        f"<span class=role>role: {e(role or 'owner')} ({rights})</span></header>"
        f"<main id=main tabindex=-1><h1>{e(title)}</h1>{body}</main></body></html>"
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
