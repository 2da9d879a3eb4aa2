"""Budgets of one runtime's runs: shared down the tree, durable, enforced (DESIGN rule 12).

A run with a budget owns a **ledger**: its limits and what its subtree has used so far, kept in
the run's session header (``meta["budget"] = {"limit": {...}, "used": {...}}``). A run draws
on every ledger from the root down to itself (its own, when it has one, and each ancestor's),
so a child's budget is the tighter of its own and what remains of its ancestors', and all the
descendants of a run draw on the same remainder.

Every charge is one store transaction that reads the ledger's stored ``used``, checks and adds
to it and writes it back, so the remainder is exact between the concurrent children of this
process, between processes sharing the state file, and across a restart: a resumed run reads
the ledgers its ancestors left, and nothing resets them. The kinds:

* ``turns``, ``tool_calls``: one per model turn, one per tool call; the one past the limit is
  refused before it happens;
* ``cost``: what each response cost (``membrane.models.prices``), in whole micro-dollars in
  the ledger, charged and enforced as ``tokens`` are; a child whose model has no known price
  is refused at its start (``model-price-unknown``) while a ``cost`` budget is in force;
* ``tokens``: each response's input plus output tokens, counted when it arrives (they were
  spent); the response that crosses the limit ends its run, a run whose next turn finds no
  token left ends then, and a request still in flight under a ledger that has run out is
  cancelled, so a tree overspends by at most one response (a run of another process drawing
  on the ledger reads it before each request, so it may add only the response it had in
  flight when the ledger ran out);
* ``children``: one per start, at any depth; the start past the limit is refused and no child
  exists (an error tool result in the parent). The charge is written in the transaction that
  publishes the child (checked before the child is built, and again there), so a start killed
  before its publication committed charged nothing, and its retry charges once;
* ``seconds``: the wall time the owner's subtree runs in this process, added to what earlier
  lives used; at the deadline the run is ended.

The run that crosses a ledger ends with ``budget-exceeded``; nothing else is stopped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from membrane.config.budget import BUDGET_KINDS, COUNT_KINDS, Budget
from membrane.errors import BudgetExceeded, ModelPriceUnknown, StoreError
from membrane.json_types import JSONDict
from membrane.models.base import Usage
from membrane.models.prices import Prices
from membrane.store.base import BUDGET_KEY, SessionHeader, Store

__all__ = ["BUDGET_KEY", "Budgets", "Ledger", "RunSpending", "stored_ledger"]

T = TypeVar("T")

#: What the ledger counts in whole numbers: ``cost`` in micro-dollars.
_COUNTS: Final = (*COUNT_KINDS, "cost")
_MICRO: Final = 1_000_000


class Ledger:
    """One run's budget and what its subtree used (the counts, and seconds before this life)."""

    __slots__ = ("_clock0", "_seconds_before", "limit", "owner", "spenders", "used")

    def __init__(self, owner: str, limit: Budget, used: Mapping[str, Any] | None = None) -> None:
        self.owner = owner
        self.limit = limit
        self.used: dict[str, int] = {kind: 0 for kind in _COUNTS}
        self._seconds_before = 0.0
        self._clock0 = time.monotonic()
        self.spenders: set[RunSpending] = set()
        if used:
            self._load(used)
            seconds = used.get("seconds")
            if isinstance(seconds, int | float) and math.isfinite(seconds) and seconds >= 0:
                self._seconds_before = float(seconds)

    def _load(self, used: Mapping[str, Any]) -> None:
        """The stored counts, which are the truth (another process may have added to them)."""
        for kind in COUNT_KINDS:
            value = used.get(kind)
            if type(value) is int and value >= 0:
                self.used[kind] = value
        cost = used.get("cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
            self.used["cost"] = round(cost * _MICRO)

    def units(self, kind: str) -> int | float | None:
        """The limit of ``kind`` in the units the ledger counts (``cost``: micro-dollars)."""
        limit = self.limit.limit(kind)
        if limit is None or kind != "cost":
            return limit
        return round(limit * _MICRO)

    def seconds(self) -> float:
        return self._seconds_before + (time.monotonic() - self._clock0)

    def deadline(self) -> float | None:
        """When (``time.monotonic()``) the wall-time limit runs out, or ``None``."""
        if self.limit.seconds is None:
            return None
        return self._clock0 + self.limit.seconds - self._seconds_before

    def remaining(self, kind: str) -> float | None:
        """What is left of ``kind`` (``cost``: in dollars), or ``None`` when unlimited."""
        limit = self.units(kind)
        if limit is None:
            return None
        used = self.seconds() if kind == "seconds" else self.used[kind]
        left = max(0, limit - used)
        return left / _MICRO if kind == "cost" else left

    def to_meta(self) -> JSONDict:
        used: JSONDict = {**self.used, "seconds": round(self.seconds(), 3)}
        used["cost"] = self.used["cost"] / _MICRO
        return {"limit": self.limit.to_dict(), "used": used}

    def exceeded(self, kind: str, run_id: str, used: float) -> BudgetExceeded:
        """The error of ``run_id`` crossing ``kind`` with ``used`` (in ledger units)."""
        limit = self.limit.limit(kind)
        if kind == "cost":
            used = used / _MICRO
        return BudgetExceeded(
            f"run {run_id!r} would spend past the {kind} budget of run {self.owner!r} "
            f"({_show(used)} of {_show(limit)} used)",
            kind=kind,
            limit=limit,
            used=used,
            owner=self.owner,
            run_id=run_id,
        )


def stored_ledger(header: SessionHeader) -> Ledger | None:
    """The ledger a header keeps, or ``None`` when the run has no budget of its own."""
    raw = header.meta.get(BUDGET_KEY)
    if not isinstance(raw, Mapping) or not isinstance(raw.get("limit"), Mapping):
        return None
    try:
        limit = Budget.parse(raw["limit"])
    except Exception:
        return None
    used = raw.get("used")
    return Ledger(header.session_id, limit, used if isinstance(used, Mapping) else None)


class Budgets:
    """The ledgers in use in one runtime, by owner. ``commit(work)`` runs store work in one
    transaction (the event hub's, so a charge is durable with the events before it)."""

    def __init__(
        self,
        store: Store,
        *,
        commit: Callable[[Callable[[], Any]], Any],
        errors: list[StoreError],
        prices: Prices | None = None,
    ) -> None:
        #: What each model's responses cost (a ``cost`` budget charges it).
        self.prices = prices if prices is not None else Prices({})
        self._store = store
        self._commit = commit
        self._errors = errors
        self._ledgers: dict[str, Ledger] = {}

    def ledger(self, owner: str) -> Ledger | None:
        """``owner``'s ledger: the one in use here, else the one its header keeps."""
        found = self._ledgers.get(owner)
        if found is not None:
            return found
        header = self._store.get_header(owner)
        return None if header is None else stored_ledger(header)

    def ancestors(self, parent_id: str | None) -> tuple[Ledger, ...]:
        """The ledgers a child of ``parent_id`` draws on, from the root down (read through
        the stored headers, so a parent that is not live here still bounds its child)."""
        if parent_id is None:
            return ()  # the host's child: no ancestor
        chain: list[Ledger] = []
        seen: set[str] = set()
        run: str | None = parent_id
        while run is not None and run not in seen:
            seen.add(run)
            header = self._store.get_header(run)
            if header is None:
                break
            ledger = self._ledgers.get(run) or stored_ledger(header)
            if ledger is not None:
                chain.append(ledger)
            run = header.parent_id
        return tuple(reversed(chain))

    def spending(self, run_id: str, ledgers: tuple[Ledger, ...]) -> RunSpending:
        """What ``run_id`` spends through; it holds ``ledgers`` in use until ``close()``."""
        spending = RunSpending(self, run_id, ledgers)
        for ledger in ledgers:
            current = self._ledgers.setdefault(ledger.owner, ledger)
            current.spenders.add(spending)
        spending.ledgers = tuple(self._ledgers[ledger.owner] for ledger in ledgers)
        return spending

    def check_child(self, ledgers: tuple[Ledger, ...], run_id: str) -> None:
        """Refuse a start that ``ledgers`` have no child left for (``BudgetExceeded``), before
        anything is built; nothing is counted (``charge_child`` counts it)."""
        self.charge(ledgers, "children", 1, run_id=run_id, dry=True)

    def charge_child(self, ledgers: tuple[Ledger, ...], run_id: str) -> None:
        """Count one start on ``ledgers``, or refuse it (``BudgetExceeded``, nothing counted).
        Called inside the transaction publishing the child: the charge commits with the child
        or not at all, so a start retried after a crash (its request id) is charged once."""
        self.charge(ledgers, "children", 1, run_id=run_id)

    def refresh(self, ledgers: tuple[Ledger, ...]) -> None:
        """Load what ``ledgers`` have used from the store (other processes add to it); a
        store that cannot be read leaves the counts this process has."""
        for ledger in ledgers:
            try:
                header = self._store.get_header(ledger.owner)
            except StoreError:
                continue
            stored = None if header is None else header.meta.get(BUDGET_KEY)
            used = stored.get("used") if isinstance(stored, Mapping) else None
            if isinstance(used, Mapping):
                ledger._load(used)

    def release(self, spending: RunSpending) -> None:
        """``spending``'s run ended: its ledgers record their seconds and, once no run of
        this runtime draws on one, are read from the store again next time."""
        if spending.ledgers:
            self.charge(spending.ledgers, "seconds", 0, run_id=spending.run_id, check=False)
        for ledger in spending.ledgers:
            ledger.spenders.discard(spending)
            if not ledger.spenders and self._ledgers.get(ledger.owner) is ledger:
                del self._ledgers[ledger.owner]

    def charge(
        self,
        ledgers: tuple[Ledger, ...],
        kind: str,
        amount: int,
        *,
        run_id: str,
        check: bool = True,
        after: bool = False,
        dry: bool = False,
    ) -> None:
        """Add ``amount`` of ``kind`` to every ledger, in one transaction. ``check`` refuses
        the charge when it would cross a limit (nothing is counted); ``after`` counts it
        first (the tokens were already spent) and then raises when it crossed one; ``dry``
        only checks, against the stored ledgers, and counts nothing."""
        if not ledgers:
            return
        store = self._store

        def apply(durable: bool) -> BudgetExceeded | None:
            if durable:
                # Each ledger's row stays locked until the charge commits (``lock_ledger``),
                # so concurrent charges of one ledger, in any process, add up exactly.
                for ledger in ledgers:
                    stored = store.lock_ledger(ledger.owner)
                    used = None if stored is None else stored.get("used")
                    if isinstance(used, Mapping):
                        ledger._load(used)
            crossed: BudgetExceeded | None = None
            for ledger in ledgers:
                limit = ledger.units(kind)
                if check and limit is not None and kind in _COUNTS:
                    used_now = ledger.used[kind] + amount
                    if used_now > limit and crossed is None:
                        # Refused: what is used already; counted: what it came to.
                        shown = used_now if after else ledger.used[kind]
                        crossed = ledger.exceeded(kind, run_id, shown)
            if crossed is not None and not after:
                raise crossed  # nothing was counted: the transaction has nothing to undo
            if dry:
                return None
            for ledger in ledgers:
                if kind in _COUNTS:
                    ledger.used[kind] = max(0, ledger.used[kind] + amount)
                if durable:
                    store.write_ledger(ledger.owner, ledger.to_meta())
            # Counted and committed first; the caller raises it afterwards.
            return crossed

        try:
            crossed = apply(True) if dry else self._commit(lambda: apply(True))
        except StoreError as exc:
            # The store refused: count here all the same, so the run stays bounded.
            self._errors.append(exc)
            crossed = apply(False)
        if crossed is not None:
            raise crossed


class RunSpending:
    """What one run spends, drawn on each of its ``ledgers`` (the loop's ``Spending``)."""

    __slots__ = ("_budgets", "_end", "ledgers", "requesting", "run_id")

    def __init__(self, budgets: Budgets, run_id: str, ledgers: tuple[Ledger, ...]) -> None:
        self._budgets = budgets
        self.run_id = run_id
        self.ledgers = ledgers
        #: A model request of this run is in flight (between ``before_turn`` and its response).
        self.requesting = False
        self._end: Callable[[BudgetExceeded], None] | None = None

    def close(self) -> None:
        """The run ended: it draws on nothing any more."""
        self._end = None
        self.requesting = False
        self._budgets.release(self)

    def bind(self, end: Callable[[BudgetExceeded], None]) -> None:
        """How the runtime ends this run when another run spent what it needed."""
        self._end = end

    def priced(self, model: str) -> bool:
        """Whether ``model`` (``provider:model`` or an entry's name) has a known price."""
        return self._budgets.prices.known(model)

    @property
    def costed(self) -> bool:
        """Whether a ``cost`` budget is in force on any of its ledgers."""
        return any(ledger.limit.cost is not None for ledger in self.ledgers)

    def before_turn(self) -> None:
        # Read first: a run of another process may have spent the rest since this one's
        # last charge, and a request sent now would be one more response past the limit.
        self._budgets.refresh(self.ledgers)
        for ledger in self.ledgers:
            for kind in ("tokens", "cost"):
                left = ledger.remaining(kind)
                if left is not None and left <= 0:
                    raise ledger.exceeded(kind, self.run_id, ledger.used[kind])
        self._budgets.charge(self.ledgers, "turns", 1, run_id=self.run_id)
        self.requesting = True

    def after_response(self, usage: Usage, *, model: str | None = None) -> None:
        self.requesting = False
        tokens = usage.total_tokens
        try:
            self._budgets.charge(self.ledgers, "tokens", tokens, run_id=self.run_id, after=True)
            if self.costed:
                cost = self._budgets.prices.cost(model, usage)
                if cost is None:
                    raise ModelPriceUnknown(
                        f"model {model!r} has no known price, and a cost budget is in force: "
                        "give its [models.NAME] entry a price",
                        model=model,
                    )
                self._budgets.charge(self.ledgers, "cost", cost, run_id=self.run_id, after=True)
        finally:
            self._cancel_in_flight()

    def before_tool_call(self) -> None:
        self._budgets.charge(self.ledgers, "tool_calls", 1, run_id=self.run_id)

    def deadline(self) -> float | None:
        """The earliest wall-time deadline of its ledgers (``time.monotonic()``), or ``None``."""
        deadlines = [d for d in (ledger.deadline() for ledger in self.ledgers) if d is not None]
        return min(deadlines) if deadlines else None

    def expired(self) -> BudgetExceeded:
        """The error of a run whose wall time ran out."""
        ledger = min(
            (ledger for ledger in self.ledgers if ledger.deadline() is not None),
            key=lambda ledger: ledger.deadline() or 0.0,
        )
        return ledger.exceeded("seconds", self.run_id, round(ledger.seconds(), 3))

    def in_force(self) -> JSONDict:
        """What the run may still spend of each limited kind (the tightest of its ledgers)."""
        out: JSONDict = {}
        for kind in BUDGET_KINDS:
            left = [r for r in (ledger.remaining(kind) for ledger in self.ledgers) if r is not None]
            if left:
                value = min(left)
                if kind == "cost":
                    out[kind] = round(value, 6)
                else:
                    out[kind] = round(value, 3) if kind == "seconds" else int(value)
        return out

    def _cancel_in_flight(self) -> None:
        """A ledger ran out of tokens: the other runs whose request is in flight on it end
        now, their requests cancelled, rather than each overspending by a response."""
        for ledger in self.ledgers:
            for kind in ("tokens", "cost"):
                left = ledger.remaining(kind)
                if left is None or left > 0:
                    continue
                for other in list(ledger.spenders):
                    if other is not self and other.requesting and other._end is not None:
                        other.requesting = False
                        other._end(ledger.exceeded(kind, other.run_id, ledger.used[kind]))


def _show(value: float | None) -> str:
    if value is None:
        return "no limit"
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"
