"""Delegation depth: an absolute tree cap that a restart can never lower (seed 001).

A top-level agent has depth 0 and a child has its parent's depth + 1. The parent's depth is the
larger of the durable ``SessionHeader.delegation_depth`` and the runtime's own value, so a crash
that loses the in-memory tree cannot reset the count, and a store that lost a row cannot either.
The depth domain itself (which values are depths) is ``membrane.limits``.
"""

from __future__ import annotations

from membrane.errors import DepthLimitExceeded
from membrane.limits import check_depth

__all__ = ["check_cap", "effective_parent_depth"]


def effective_parent_depth(*, stored: object | None, live: object | None, parent_id: str) -> int:
    """The larger of the durable header's depth and the runtime's value; each is validated.

    ``None`` means that side knows nothing about the parent (no header, or not running here).
    """
    depths = [0]
    if stored is not None:
        depths.append(check_depth(stored, what=f"stored delegation depth of {parent_id!r}"))
    if live is not None:
        depths.append(check_depth(live, what=f"runtime delegation depth of {parent_id!r}"))
    return max(depths)


def check_cap(depth: object, cap: object, *, agent: str, parent_id: str | None) -> None:
    """Reject a start whose child depth would exceed ``cap`` (``None``: no cap).

    Both values are validated first, with the domain of ``max_depth``: a malformed ``cap``
    (``True``, NaN, ``"3"`` ...) or ``depth`` is ``InvalidDepth``, never a cap decision.
    """
    depth = check_depth(depth, what="child delegation depth")
    if cap is None:
        return
    cap = check_depth(cap, what="max_depth")
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
