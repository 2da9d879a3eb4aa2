"""Checking untrusted call parameters (a tool call's, an RPC payload's, ``--call``'s JSON) for
``CallParams.from_mapping``, imported only when there are some to check.

``CallTable`` (pydantic, strict, no unknown keys) decides what is valid; the refusal is worded
from its first problem as it always was: the field (``where.field``), what it expects and what
arrived (``call.max_turns: expected a whole number from 1 to 2**53-1, got the string '3'``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from membrane.errors import InvalidRequest
from membrane.limits import MAX_SAFE_INT

__all__ = ["CallTable", "call_values"]

_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class CallTable(BaseModel):
    """One call's parameters, as a caller writes them (``None``: not given): the spawn-time
    fields of ``vocabulary.SPAWN_FIELDS``, in its order, and ``description``."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    model: _Text | None = None
    thinking: _Text | None = None
    max_turns: Annotated[int, Field(ge=1, le=MAX_SAFE_INT)] | None = None
    inherit_context: bool | None = None
    run_in_background: bool | None = None
    isolated: bool | None = None
    isolation: Literal["off", "worktree"] | None = None
    description: _Text | None = None


#: The spawn-time fields (``vocabulary.SPAWN_FIELDS``, in its order) and ``description``.
_CALL_FIELDS: Final[tuple[str, ...]] = tuple(CallTable.model_fields)

#: What each field expects, in the words of a refusal.
_EXPECTED: Final[Mapping[str, str]] = {
    "model": "a non-empty string",
    "thinking": "a non-empty string",
    "description": "a non-empty string",
    "max_turns": "a whole number from 1 to 2**53-1",
    "inherit_context": "true or false",
    "run_in_background": "true or false",
    "isolated": "true or false",
    "isolation": '"off" or "worktree"',
}


def call_values(data: object, *, where: str) -> dict[str, object]:
    """The checked fields of ``data`` (a JSON ``null`` counts as not given), or
    ``InvalidRequest`` naming the field (``where.field``), what was expected and what arrived."""
    if not isinstance(data, Mapping):
        raise InvalidRequest(
            f"{where}: expected a JSON object of call parameters, got {_kind(data)}",
            field=None,
        )
    for key in data:
        if not isinstance(key, str) or key not in _CALL_FIELDS:
            import difflib  # an unknown parameter only

            close = difflib.get_close_matches(str(key), _CALL_FIELDS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidRequest(
                f"{where}: unknown call parameter {key!r}{hint} (known: {', '.join(_CALL_FIELDS)})",
                field=str(key),
            )
    given = {key: value for key, value in data.items() if value is not None}
    try:
        checked = CallTable.model_validate(given)
    except ValidationError as exc:
        key = str(exc.errors()[0]["loc"][0])
        raise InvalidRequest(
            f"{where}.{key}: expected {_EXPECTED[key]}, got {_kind(given[key])}", field=key
        ) from None
    return checked.model_dump(exclude_none=True)


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
