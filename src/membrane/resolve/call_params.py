"""Checking untrusted call parameters (a tool call's, an RPC payload's, ``--call``'s JSON) for
``CallParams.from_mapping``, imported only when there are some to check."""

from __future__ import annotations

from collections.abc import Mapping

from membrane.errors import InvalidRequest
from membrane.limits import count_problem
from membrane.vocabulary import SPAWN_FIELDS

__all__ = ["call_values"]


def call_values(data: object, *, where: str) -> dict[str, object]:
    """The checked fields of ``data`` (a JSON ``null`` counts as not given), or
    ``InvalidRequest`` naming the field (``where.field``), what was expected and what arrived."""
    if not isinstance(data, Mapping):
        raise InvalidRequest(
            f"{where}: expected a JSON object of call parameters, got {_kind(data)}",
            field=None,
        )
    values: dict[str, object] = {}
    for key, value in data.items():
        if not isinstance(key, str) or key not in _CALL_FIELDS:
            import difflib  # an unknown parameter only

            close = difflib.get_close_matches(str(key), _CALL_FIELDS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidRequest(
                f"{where}: unknown call parameter {key!r}{hint} (known: {', '.join(_CALL_FIELDS)})",
                field=str(key),
            )
        if value is None:
            continue
        values[key] = _check(key, value, where=where)
    return values


_CALL_FIELDS: tuple[str, ...] = (*SPAWN_FIELDS, "description")
_BOOL_FIELDS = frozenset({"inherit_context", "run_in_background", "isolated"})
_STRING_FIELDS = frozenset({"model", "thinking", "description"})


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _check(key: str, value: object, *, where: str) -> object:
    if key in _BOOL_FIELDS:
        if isinstance(value, bool):
            return value
        expected = "true or false"
    elif key in _STRING_FIELDS:
        if isinstance(value, str) and value.strip():
            return value.strip()
        expected = "a non-empty string"
    elif key == "max_turns":
        if count_problem(value, minimum=1) is None:
            return value
        expected = "a whole number from 1 to 2**53-1"
    else:  # isolation
        if value in ("off", "worktree"):
            return value
        expected = '"off" or "worktree"'
    raise InvalidRequest(f"{where}.{key}: expected {expected}, got {_kind(value)}", field=key)
