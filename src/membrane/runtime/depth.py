"""Delegation depth: an absolute tree cap that a restart can never lower (seed 001).

A top-level agent has depth 0 and a child has its parent's validated depth + 1. The parent's
depth is the larger of the durable ``SessionHeader.delegation_depth`` and the runtime's own
value, so a crash that loses the in-memory tree cannot reset the count, and a store that lost a
row cannot either.

Every value here is a *non-negative safe integer*: an ``int`` (or an integral ``float``, as a
JSON number may arrive) between 0 and 2**53-1. Booleans, numeric strings, negatives, fractions,
``-0.0``, NaN and the infinities are rejected with ``InvalidDepth`` (``invalid-depth``), and so
is a derived child depth that would leave the safe range.
"""

from __future__ import annotations

import math
from typing import Final, Literal

from membrane.errors import DepthLimitExceeded, InvalidDepth
from membrane.store.base import MAX_SAFE_DEPTH

__all__ = [
    "MAX_SAFE_DEPTH",
    "PROVIDER_MANAGED",
    "DepthCap",
    "check_cap",
    "child_depth",
    "effective_parent_depth",
    "parse_depth_cap",
    "validate_depth",
]

#: The delegation tool's explicit "no cap here": the provider's deployment owns recursion.
PROVIDER_MANAGED: Final = "provider-managed"

#: A configured cap: a depth, or ``"provider-managed"``.
DepthCap = int | Literal["provider-managed"]


def validate_depth(value: object, *, what: str) -> int:
    """Return ``value`` as an ``int`` when it is a non-negative safe integer.

    ``what`` names the value in the message (``"max_depth"``, ``"stored depth of session x"``).
    """
    problem = _problem(value)
    if problem is None:
        assert isinstance(value, int | float)
        return int(value)
    raise InvalidDepth(
        f"{what} must be a non-negative integer at most 2**53-1, but {problem}",
        field=what,
        value=repr(value),
    )


def _problem(value: object) -> str | None:
    if isinstance(value, bool):
        return f"got the boolean {value!r}; write a number such as 3"
    if isinstance(value, str):
        return f"got the string {value!r}; write the number without quotes"
    if isinstance(value, float):
        if math.isnan(value):
            return "got NaN"
        if math.isinf(value):
            return f"got {value!r}; an unbounded depth is written by leaving the cap out"
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return "got -0.0"
        if not value.is_integer():
            return f"got the fraction {value!r}"
    elif not isinstance(value, int):
        return f"got {type(value).__name__} {value!r}"
    if value < 0:
        return f"got the negative value {value!r}"
    if value > MAX_SAFE_DEPTH:
        return f"got {value!r}, above the safe integer range"
    return None


def parse_depth_cap(value: object, *, what: str = "max_depth") -> int | None:
    """A configured cap: ``"provider-managed"`` gives ``None`` (no cap), else a validated depth."""
    if value == PROVIDER_MANAGED and isinstance(value, str):
        return None
    if isinstance(value, str):
        raise InvalidDepth(
            f"{what} must be a non-negative integer or {PROVIDER_MANAGED!r}, got {value!r}",
            field=what,
            value=repr(value),
        )
    return validate_depth(value, what=what)


def effective_parent_depth(*, stored: object | None, live: object | None, parent_id: str) -> int:
    """The larger of the durable header's depth and the runtime's value; each is validated.

    ``None`` means that side knows nothing about the parent (no header, or not running here).
    """
    depths = [0]
    if stored is not None:
        depths.append(validate_depth(stored, what=f"stored delegation depth of {parent_id!r}"))
    if live is not None:
        depths.append(validate_depth(live, what=f"runtime delegation depth of {parent_id!r}"))
    return max(depths)


def child_depth(parent_depth: object, *, parent_id: str) -> int:
    """The parent's validated depth + 1; a result outside the safe range is ``InvalidDepth``."""
    depth = validate_depth(parent_depth, what=f"delegation depth of {parent_id!r}") + 1
    if depth > MAX_SAFE_DEPTH:
        raise InvalidDepth(
            f"a child of {parent_id!r} would have depth {depth}, above 2**53-1; "
            "the stored tree is corrupt or unbounded",
            field="delegation_depth",
            value=repr(depth),
        )
    return depth


def check_cap(depth: object, cap: object, *, agent: str, parent_id: str | None) -> None:
    """Reject a start whose child depth would exceed ``cap`` (``None``: no cap).

    Both values are validated first, with the domain of ``max_depth``: a malformed ``cap``
    (``True``, NaN, ``"3"`` ...) or ``depth`` is ``InvalidDepth``, never a cap decision.
    """
    depth = validate_depth(depth, what="child delegation depth")
    if cap is None:
        return
    cap = validate_depth(cap, what="max_depth")
    if depth <= cap:
        return
    under = f"under {parent_id!r} " if parent_id else ""
    raise DepthLimitExceeded(
        f"cannot start {agent!r} {under}at depth {depth}: the delegation depth cap is {cap} "
        f"(top level is 0). Finish the work at this level or raise max_depth.",
        depth=depth,
        max_depth=cap,
        agent=agent,
        parent_id=parent_id,
    )
