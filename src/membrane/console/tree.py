"""The delegation tree as the console draws it: one row per run, kept from the project's
lifecycle events (``events/subscribe``) over the rows the store held when the console started.
Nothing here is invented: each column is an event's field."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from membrane.runtime.events import TERMINAL_KINDS

__all__ = ["Row", "RunTree"]


@dataclass
class Row:
    """One run of the tree."""

    run_id: str
    agent: str
    parent_id: str | None
    depth: int = 0
    status: str = "running"
    model: str = ""
    model_source: str = ""
    turn: int = 0
    tool_calls: int = 0
    tokens: int = 0
    children: int = 0
    #: What the run could spend when it started (the budget in force), by kind.
    budget: dict[str, Any] = field(default_factory=dict)
    vetoed: list[str] = field(default_factory=list)
    refused_starts: list[str] = field(default_factory=list)
    last_call: str = ""
    error: str = ""
    seconds: float = 0.0
    started_at: float = 0.0

    @property
    def live(self) -> bool:
        return self.status in ("running", "queued", "pending")


@dataclass
class RunTree:
    """Every run the console knows, in the order it learned of them."""

    rows: dict[str, Row] = field(default_factory=dict)

    def seed(self, stored: Mapping[str, Any]) -> None:
        """A run as ``runs/list`` (``stored: true``) gives it; later events refine it."""
        run_id = str(stored.get("run_id"))
        if run_id in self.rows:
            return
        self.rows[run_id] = Row(
            run_id=run_id,
            agent=str(stored.get("agent") or ""),
            parent_id=stored.get("parent_id"),
            depth=int(stored.get("depth") or 0),
            status=str(stored.get("status") or ""),
        )

    def apply(self, event: Mapping[str, Any]) -> Row | None:
        """Fold one ``events/event`` payload into the tree; the row it changed, if any."""
        kind = str(event.get("kind"))
        run_id = str(event.get("run_id"))
        data: Mapping[str, Any] = event.get("data") or {}
        if kind == "published":
            row = Row(
                run_id=run_id,
                agent=str(event.get("agent") or ""),
                parent_id=event.get("parent_id"),
                depth=int(data.get("depth") or 0),
                budget=dict(data.get("budget") or {}),
                started_at=float(event.get("at") or 0.0),
            )
            model = data.get("model")
            if isinstance(model, Mapping):
                row.model = str(model.get("value") or model.get("model") or "")
                row.model_source = str(model.get("source") or "")
            elif isinstance(model, str):
                row.model = model
            self.rows[run_id] = row
            parent = self.rows.get(str(row.parent_id)) if row.parent_id else None
            if parent is not None:
                parent.children += 1
            return row
        known = self.rows.get(run_id)
        if known is None:
            return None
        _fold(known, kind, data, at=float(event.get("at") or 0.0))
        return known

    def ordered(self) -> Iterator[Row]:
        """Rows depth first: each run followed by its children, in the order they started."""
        below: dict[str | None, list[Row]] = {}
        for row in self.rows.values():
            parent = row.parent_id if row.parent_id in self.rows else None
            below.setdefault(parent, []).append(row)
        stack = list(reversed(below.get(None, [])))
        while stack:
            row = stack.pop()
            yield row
            stack.extend(reversed(below.get(row.run_id, [])))


def _fold(row: Row, kind: str, data: Mapping[str, Any], *, at: float) -> None:
    if kind == "turn":
        row.turn = int(data.get("turn") or row.turn)
    elif kind == "tool_call":
        row.tool_calls += 1
        row.last_call = str(data.get("name") or "")
    elif kind == "vetoed_call":
        row.vetoed.append(f"{data.get('name')} ({data.get('code')})")
    elif kind == "tool_result" and data.get("is_error") and data.get("name") == "Task":
        row.refused_starts.append(str(data.get("code")))
    elif kind == "usage":
        row.tokens += int(data.get("input_tokens") or 0) + int(data.get("output_tokens") or 0)
    elif kind in TERMINAL_KINDS:
        row.status = str(data.get("status") or kind)
        error = data.get("error")
        if isinstance(error, Mapping):
            row.error = f"{error.get('code')}: {error.get('message')}"
        if row.started_at and at:
            row.seconds = max(0.0, at - row.started_at)
