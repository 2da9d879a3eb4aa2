"""The runs a project's store holds, as ``membrane runs`` lists them (in process, or through
the machine runtime's ``runs/list`` with ``stored``): id, agent, parent, depth, status, the
completion notices still owed to each, its usage and its subtree's, and its budget ledger.

Only the store is read.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from membrane.durable.runs import RunResult
from membrane.errors import StoreDamaged, UnknownRun
from membrane.models.base import Usage
from membrane.runtime.budget import stored_ledger
from membrane.store.base import SessionHeader, Store
from membrane.store.inspection import stored_lease
from membrane.store.select import StateTarget, open_reader
from membrane.store.sqlite import SQLiteStore

__all__ = [
    "RUNS_PAGE",
    "RUNS_PAGE_MAX",
    "RunRow",
    "list_runs",
    "page_rows",
    "row_from_dict",
    "subtree",
]

#: More undelivered items than any listing needs to count; ``pending_outbox`` is bounded.
_ALL_PENDING: Final = 2**31 - 1

#: Runs per page of ``runs/list`` when the caller names no ``limit``, and the most it may ask.
RUNS_PAGE: Final = 100
RUNS_PAGE_MAX: Final = 1000


@dataclass(frozen=True, slots=True)
class RunRow:
    """One stored run as ``membrane runs`` lists it.

    ``pending_notices`` counts the completion notices still owed to the run (undelivered outbox
    items addressed to it): a resume of the run takes them.
    """

    run_id: str
    agent: str
    parent_id: str | None
    depth: int
    status: str
    created_at: float
    pending_notices: int
    #: The run's own usage, and its own plus every descendant's (DESIGN rule 12).
    usage: Usage = field(default_factory=Usage)
    usage_total: Usage = field(default_factory=Usage)
    #: The run's own budget ledger (``{"limit", "used"}``), when it has one (DESIGN rule 12).
    budget: Mapping[str, Any] | None = None
    #: What its own model responses cost, and its own plus every descendant's, in micro-dollars
    #: (``membrane.models.prices``); ``None``: unknown (a response whose price is not known).
    cost_micros: int | None = 0
    cost_total_micros: int | None = 0

    @property
    def cost(self) -> float | None:
        """The run's own cost in US dollars; ``None``: unknown."""
        return dollars(self.cost_micros)

    @property
    def cost_total(self) -> float | None:
        """The subtree's cost in US dollars; ``None``: unknown."""
        return dollars(self.cost_total_micros)

    #: Who drives it now: the owner of its live lease (a runtime, or a ``membrane worker``),
    #: ``None`` when no process holds one.
    held_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        extra = {} if self.budget is None else {"budget": dict(self.budget)}
        return {
            "run_id": self.run_id,
            "agent": self.agent,
            "parent_id": self.parent_id,
            "depth": self.depth,
            "status": self.status,
            "created_at": self.created_at,
            "pending_notices": self.pending_notices,
            "usage": self.usage.to_dict(),
            "usage_total": self.usage_total.to_dict(),
            "cost": self.cost,
            "cost_total": self.cost_total,
            "held_by": self.held_by,
            **extra,
        }


def row_from_dict(data: Mapping[str, Any]) -> RunRow:
    """The row ``RunRow.to_dict()`` wrote (as ``runs/list`` sends it)."""

    def usage(value: object) -> Usage:
        return Usage(**value) if isinstance(value, Mapping) else Usage()

    budget = data.get("budget")
    return RunRow(
        run_id=str(data["run_id"]),
        agent=str(data["agent"]),
        parent_id=data.get("parent_id"),
        depth=int(data["depth"]),
        status=str(data["status"]),
        created_at=float(data["created_at"]),
        pending_notices=int(data["pending_notices"]),
        usage=usage(data.get("usage")),
        usage_total=usage(data.get("usage_total")),
        budget=dict(budget) if isinstance(budget, Mapping) else None,
        cost_micros=micros(data.get("cost")),
        cost_total_micros=micros(data.get("cost_total")),
        held_by=data.get("held_by"),
    )


def page_rows(
    rows: list[RunRow], *, limit: int, after: str | None
) -> tuple[list[RunRow], str | None]:
    """Up to ``limit`` of ``rows`` from just after run ``after`` (``UnknownRun`` when it is
    not among them), and the ``after`` of the next page (``None``: this is the last)."""
    start = 0
    if after is not None:
        for index, row in enumerate(rows):
            if row.run_id == after:
                start = index + 1
                break
        else:
            raise UnknownRun(f"no run {after!r} to list after", run_id=after)
    page = rows[start : start + limit]
    following = page[-1].run_id if start + limit < len(rows) else None
    return page, following


def subtree(rows: list[RunRow], root: str) -> list[RunRow]:
    """The rows of ``root``'s descendants (not ``root`` itself), in the order given."""
    children: dict[str | None, list[str]] = {}
    for row in rows:
        children.setdefault(row.parent_id, []).append(row.run_id)
    mine: set[str] = set()
    todo = list(children.get(root, ()))
    while todo:
        run_id = todo.pop()
        if run_id not in mine:
            mine.add(run_id)
            todo.extend(children.get(run_id, ()))
    return [row for row in rows if row.run_id in mine]


def list_runs(state: StateTarget) -> list[RunRow]:
    """Every run stored in ``state`` (an existing store file), oldest first.

    Raises ``StoreError`` for a file that is not a Membrane store (``store-not-membrane``) or
    fails its check (``store-damaged``: ``PRAGMA quick_check`` reads the whole file first) and
    ``InvalidDepth`` when a stored depth is malformed.
    """
    store = open_reader(state)
    try:
        problems = store.quick_check() if isinstance(store, SQLiteStore) else []
        if problems:
            raise StoreDamaged(
                f"{state} fails its check ({'; '.join(problems[:3])}); run `membrane doctor`, "
                "and restore the file from a copy",
                path=str(state),
                problems=problems,
            )
        sessions = store.list_sessions()
        owed = Counter(item.recipient for item in store.pending_outbox(limit=_ALL_PENDING))
        own = {header.session_id: _own_spending(store, header) for header in sessions}
        now = time.time()
        held = {}
        for header in sessions:
            lease = stored_lease(store, header.session_id)
            if lease is not None and lease.expires_at > now:
                held[header.session_id] = lease.owner
    finally:
        store.close()
    totals = dict(own)
    by_id = {header.session_id: header for header in sessions}
    for header in sorted(sessions, key=lambda h: -h.delegation_depth):  # leaves first
        parent = header.parent_id
        if parent in totals and parent != header.session_id:
            (usage, cost), (more, more_cost) = totals[parent], totals[header.session_id]
            summed = None if cost is None or more_cost is None else cost + more_cost
            totals[parent] = (usage + more, summed)
    return [
        _row(by_id[sid], owed[sid], own=own[sid], total=totals[sid], held_by=held.get(sid))
        for sid in by_id
    ]


def dollars(micros: int | None) -> float | None:
    """Micro-dollars as US dollars (``None``, unknown, stays ``None``)."""
    return None if micros is None else micros / 1_000_000


def micros(value: object) -> int | None:
    """A cost in US dollars as micro-dollars; ``None`` (unknown) for anything but a number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return round(value * 1_000_000)


def _own_spending(store: Store, header: SessionHeader) -> tuple[Usage, int | None]:
    """The stored result's usage and cost (micro-dollars); for a run without one (running,
    interrupted) the sums of its per-turn ``usage`` events, the cost unknown when one of them
    carries no known cost."""
    stored = RunResult.from_dict(header.result) if header.result is not None else None
    if stored is not None and "usage" in (header.result or {}):
        return stored.usage, stored.outcome.cost
    total = Usage()
    cost: int | None = 0
    for event in store.events(session_id=header.session_id):
        if event.kind == "usage":
            counts = [event.data.get(key, 0) for key in Usage.__dataclass_fields__]
            if all(type(count) is int and count >= 0 for count in counts):
                total = total + Usage(*counts)  # type: ignore[arg-type]
            spent = micros(event.data.get("cost"))
            cost = None if cost is None or spent is None else cost + spent
    return total, cost


def _row(
    header: SessionHeader,
    pending: int,
    *,
    own: tuple[Usage, int | None],
    total: tuple[Usage, int | None],
    held_by: str | None = None,
) -> RunRow:
    (usage, cost), (usage_total, cost_total) = own, total
    return RunRow(
        run_id=header.session_id,
        agent=header.agent,
        parent_id=header.parent_id,
        depth=header.delegation_depth,
        status=header.status,
        created_at=header.created_at,
        pending_notices=pending,
        usage=usage,
        usage_total=usage_total,
        budget=_ledger(header),
        cost_micros=cost,
        cost_total_micros=cost_total,
        held_by=held_by,
    )


def _ledger(header: SessionHeader) -> Mapping[str, Any] | None:
    ledger = stored_ledger(header)
    return None if ledger is None else ledger.to_meta()
