"""Number domains: the one place that says which numbers Membrane accepts.

Every number that enters Membrane (a start request, settings, a config file, ``resolve()``,
``explain``, a stored header, the agent loop's knobs) is checked here, once, where it enters.
The domains:

* **depth**: a delegation depth or a depth cap: a non-negative *safe integer* (0 to 2**53-1,
  the largest integer a JSON number carries exactly). Booleans, numeric strings, negatives,
  fractions, ``-0.0``, NaN and the infinities are ``InvalidDepth`` (``invalid-depth``). A value
  that arrived as a JSON number may be an integral float (``3.0``); ``exact=True`` refuses even
  that, for values that never went through JSON (a stored header, a Python caller's depth).
* **depth cap**: a depth, or ``"provider-managed"`` (no cap here: the provider's deployment
  owns recursion).
* **count**: turns, retries, concurrency: a whole number from a stated minimum to 2**53-1,
  never a boolean or a float; else ``InvalidRequest`` naming the field.
* **seconds**: a finite, non-negative number of seconds (a timeout); else ``InvalidRequest``.
"""

from __future__ import annotations

import math
from typing import Final, Literal

from membrane.errors import InvalidDepth, InvalidRequest

__all__ = [
    "APPROVAL_TIMEOUT",
    "MAX_SAFE_INT",
    "MAX_TOOL_OUTPUT_BYTES",
    "PROVIDER_MANAGED",
    "DepthCap",
    "check_count",
    "check_depth",
    "check_depth_cap",
    "check_seconds",
    "child_depth",
    "count_problem",
    "depth_problem",
]

#: Seconds a call an ``ask`` rule holds waits for the answering client over the socket
#: (``membrane serve --approval-timeout`` gives another).
APPROVAL_TIMEOUT: Final = 120.0
#: The largest integer a JSON number carries exactly (2**53 - 1); seed 001 rejects unsafe ones.
MAX_SAFE_INT: Final = 2**53 - 1
#: Bytes of a tool's subprocess output kept per stream (``Bash``, the sandbox's default); the
#: middle of a longer stream is dropped with a note.
MAX_TOOL_OUTPUT_BYTES: Final = 30_000
#: The cap that means "no cap here": the provider's deployment owns recursion.
PROVIDER_MANAGED: Final = "provider-managed"
#: A configured cap: a depth, or ``"provider-managed"``.
DepthCap = int | Literal["provider-managed"]


def depth_problem(value: object, *, exact: bool = False) -> str | None:
    """Why ``value`` is not a depth (``None``: it is one). ``exact`` refuses integral floats."""
    if type(value) is int and 0 <= value <= MAX_SAFE_INT:
        return None  # the usual case, decided before the checks of everything else
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
        if exact:
            return f"got the float {value!r}; a depth here is a whole int"
    elif not isinstance(value, int):
        return f"got {type(value).__name__} {value!r}"
    if value < 0:
        return f"got the negative value {value!r}"
    if value > MAX_SAFE_INT:
        return f"got {value!r}, above the safe integer range"
    return None


def check_depth(value: object, *, what: str, exact: bool = False) -> int:
    """``value`` as an ``int`` when it is a depth, else ``InvalidDepth`` naming ``what``."""
    problem = depth_problem(value, exact=exact)
    if problem is None:
        assert isinstance(value, int | float)
        return int(value)
    raise InvalidDepth(
        f"{what} must be a non-negative integer at most 2**53-1, but {problem}",
        field=what,
        value=repr(value),
    )


def check_depth_cap(value: object, *, what: str = "max_depth") -> int | None:
    """A configured cap: ``"provider-managed"`` gives ``None`` (no cap), else a checked depth."""
    if value == PROVIDER_MANAGED and isinstance(value, str):
        return None
    if isinstance(value, str):
        raise InvalidDepth(
            f"{what} must be a non-negative integer or {PROVIDER_MANAGED!r}, got {value!r}",
            field=what,
            value=repr(value),
        )
    return check_depth(value, what=what)


def child_depth(parent_depth: object, *, what: str) -> int:
    """The parent's checked depth + 1 (``what`` names the parent's depth); a result outside the
    safe range is ``InvalidDepth``."""
    depth = check_depth(parent_depth, what=what) + 1
    if depth > MAX_SAFE_INT:
        raise InvalidDepth(
            f"{what} + 1 must be a non-negative integer at most 2**53-1, got {what} = "
            f"{parent_depth!r}: the tree is corrupt or unbounded",
            field="depth",
            value=repr(parent_depth),
        )
    return depth


def count_problem(value: object, *, minimum: int) -> str | None:
    """Why ``value`` is not a whole number from ``minimum`` to 2**53-1 (``None``: it is)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"got {value!r}"
    if not minimum <= value <= MAX_SAFE_INT:
        return f"got {value!r}, outside {minimum} to 2**53-1"
    return None


def check_count(
    value: object, *, what: str, minimum: int = 0, optional: bool = False
) -> int | None:
    """``value`` when it is a count from ``minimum`` (``None`` too when ``optional``), else
    ``InvalidRequest`` whose ``field`` is the last dotted part of ``what``."""
    if value is None and optional:
        return None
    problem = count_problem(value, minimum=minimum)
    if problem is None:
        assert isinstance(value, int)
        return value
    none = " or None" if optional else ""
    raise InvalidRequest(
        f"{what} must be an integer from {minimum} to 2**53-1{none}, {problem}",
        field=what.rsplit(".", 1)[-1],
    )


def check_seconds(value: object, *, what: str) -> float | None:
    """A finite, non-negative number of seconds, or ``None``; else ``InvalidRequest``."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise InvalidRequest(
            f"{what} must be a non-negative number of seconds, got {value!r}", field=what
        )
    return float(value)
