"""``Budget``: the limits a run and its whole subtree spend within (DESIGN rule 12).

A budget bounds six things, each optional: ``tokens`` (input plus output tokens of every model
response), ``cost`` (what those responses cost, in US dollars: ``membrane.models.prices``),
``turns`` (model turns), ``tool_calls`` (tool calls run), ``children`` (subagent
starts, at any depth below the run) and ``seconds`` (wall time). It is written the same way
everywhere it enters:

* a start request's ``budget`` (``SubagentStartRequest``, the socket's ``start``): a ``Budget``
  or a mapping such as ``{"tokens": 200000, "children": 20}``;
* ``membrane run --budget tokens=200000,children=20,seconds=900``;
* a ``[budget]`` table in the settings (the budget of every top-level run);
* a definition's ``budget:`` field (a mapping, or the same ``kind=N,...`` text).

Where several apply to one run, each holds: ``tighter`` takes the smaller limit of each kind.
Counts are whole numbers from 0 to 2**53-1 (0 forbids the kind outright); ``cost`` is a finite
number of dollars from 0; ``seconds`` is a finite number above 0. Anything else is
``InvalidRequest`` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from membrane.errors import InvalidRequest
from membrane.json_types import JSONDict
from membrane.limits import count_problem

__all__ = ["BUDGET_KINDS", "COUNT_KINDS", "Budget", "budget_view", "tighter"]

#: The kinds a budget limits, in the order they are shown.
BUDGET_KINDS: Final = ("tokens", "cost", "turns", "tool_calls", "children", "seconds")
#: The kinds counted in whole numbers.
COUNT_KINDS: Final = ("tokens", "turns", "tool_calls", "children")
_EXAMPLE: Final = "tokens=200000,cost=5,turns=50,tool_calls=200,children=20,seconds=900"


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits on one run's subtree; ``None`` leaves a kind unbounded."""

    tokens: int | None = None
    turns: int | None = None
    tool_calls: int | None = None
    children: int | None = None
    seconds: float | None = None
    #: US dollars.
    cost: float | None = None

    def __post_init__(self) -> None:
        cost = self.cost
        if cost is not None:
            if (
                isinstance(cost, bool)
                or not isinstance(cost, int | float)
                or not math.isfinite(cost)
                or cost < 0
            ):
                raise InvalidRequest(
                    f"budget cost must be a finite number of dollars from 0, got {cost!r}",
                    field="budget.cost",
                    hint=_EXAMPLE,
                )
            object.__setattr__(self, "cost", float(cost))
        for kind in COUNT_KINDS:
            value = getattr(self, kind)
            problem = None if value is None else count_problem(value, minimum=0)
            if problem is not None:
                raise InvalidRequest(
                    f"budget {kind} must be a whole number from 0 to 2**53-1, {problem}",
                    field=f"budget.{kind}",
                    hint=_EXAMPLE,
                )
        seconds = self.seconds
        if seconds is not None:
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, int | float)
                or not math.isfinite(seconds)
                or seconds <= 0
            ):
                raise InvalidRequest(
                    f"budget seconds must be a finite number above 0, got {seconds!r}",
                    field="budget.seconds",
                    hint=_EXAMPLE,
                )
            object.__setattr__(self, "seconds", float(seconds))

    @property
    def empty(self) -> bool:
        """No kind is limited."""
        return all(getattr(self, kind) is None for kind in BUDGET_KINDS)

    def limit(self, kind: str) -> float | None:
        return getattr(self, kind)  # type: ignore[no-any-return]

    def to_dict(self) -> JSONDict:
        """The limited kinds only: ``{"tokens": 200000, "children": 20}``."""
        return {
            kind: getattr(self, kind) for kind in BUDGET_KINDS if getattr(self, kind) is not None
        }

    @classmethod
    def parse(cls, value: object, *, where: str = "budget") -> Budget:
        """A ``Budget``, a mapping of kinds to limits, or ``kind=N,...`` text."""
        if isinstance(value, Budget):
            return value
        if isinstance(value, str):
            return cls.parse(_pairs(value, where), where=where)
        if not isinstance(value, Mapping):
            raise InvalidRequest(
                f"{where} must be a mapping of limits or `kind=N,...` text, got "
                f"{type(value).__name__}",
                field="budget",
                hint=_EXAMPLE,
            )
        unknown = [str(key) for key in value if key not in BUDGET_KINDS]
        if unknown:
            raise InvalidRequest(
                f"{where} has no kind {unknown[0]!r}; the kinds are {', '.join(BUDGET_KINDS)}",
                field="budget",
                hint=_EXAMPLE,
            )
        try:
            return cls(**{str(key): limit for key, limit in value.items()})
        except InvalidRequest as exc:
            raise InvalidRequest(
                f"{where}: {exc.message.removeprefix('budget ')}",
                field=exc.data.get("field"),
                hint=_EXAMPLE,
            ) from None


def tighter(*budgets: Budget | None) -> Budget | None:
    """The smaller limit of each kind over ``budgets`` (``None`` when none limits anything)."""
    given = [budget for budget in budgets if budget is not None]
    values: dict[str, float] = {}
    for kind in BUDGET_KINDS:
        limits = [limit for b in given if (limit := b.limit(kind)) is not None]
        if limits:
            values[kind] = min(limits)
    return Budget(**values) if values else None  # type: ignore[arg-type]


def budget_view(sources: Mapping[str, Budget | None]) -> JSONDict:
    """Each limited kind of the tighter of ``sources`` (source name -> budget), with the
    source that sets it: ``{"tokens": {"limit": 500, "source": "definition"}}``."""
    view: JSONDict = {}
    for kind in BUDGET_KINDS:
        for source, budget in sources.items():
            limit = None if budget is None else budget.limit(kind)
            current = view.get(kind)
            if limit is not None and (not isinstance(current, dict) or limit < current["limit"]):
                view[kind] = {"limit": limit, "source": source}
    return view


def _pairs(text: str, where: str) -> dict[str, int | float]:
    out: dict[str, int | float] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        kind, sep, raw = part.partition("=")
        kind, raw = kind.strip(), raw.strip()
        if not sep or not kind or not raw:
            raise InvalidRequest(
                f"{where}: {part.strip()!r} is not `kind=N`", field="budget", hint=_EXAMPLE
            )
        try:
            number: int | float = int(raw)
        except ValueError:
            try:
                number = float(raw)
            except ValueError:
                raise InvalidRequest(
                    f"{where}: {kind} must be a number, got {raw!r}", field="budget", hint=_EXAMPLE
                ) from None
        if kind in out:
            raise InvalidRequest(f"{where}: {kind} is given twice", field="budget", hint=_EXAMPLE)
        out[kind] = number
    if not out:
        raise InvalidRequest(f"{where} is empty", field="budget", hint=_EXAMPLE)
    return out
