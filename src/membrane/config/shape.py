"""Plain checks of untrusted tables (a settings file, ``explain --parent``, an inline MCP entry).

A check takes a value and returns it (converted where the table says so: a whole number of
seconds becomes a float) or raises ``Invalid``. ``table`` checks a table's keys in the order it
declares them, then refuses any key it does not know, and stops at the first problem: the
``Invalid`` names its place (``loc``, keys and list indexes from the outside in), the kind of
problem, a sentence and the value at fault. The sentences are the ones users of Membrane have
always seen (``Input should be a valid integer``), so error messages and the documentation that
quotes them stay as they were.

Nothing here imports a validation library: the CLI's start pays for a few functions only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

__all__ = [
    "REQUIRED",
    "Check",
    "Field",
    "Invalid",
    "boolean",
    "choice",
    "integer",
    "list_of",
    "mapping_of",
    "number",
    "optional",
    "table",
    "text",
]

T = TypeVar("T")
Check = Callable[[object], object]


class Invalid(Exception):
    """The first problem of a table: where (``loc``), what kind, in words, and the value."""

    def __init__(self, kind: str, message: str, value: object) -> None:
        super().__init__(message)
        self.loc: tuple[str | int, ...] = ()
        self.kind = kind
        self.message = message
        self.value = value

    def at(self, *where: str | int) -> Invalid:
        self.loc = (*where, *self.loc)
        return self


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: A key a table must have (``Field`` default).
REQUIRED: Final = _Required()


@dataclass(frozen=True, slots=True)
class Field:
    """One key of a table: its check and its default (``REQUIRED``, a value, or a factory
    called for each table that leaves the key out)."""

    check: Check
    default: object = None
    factory: Callable[[], object] | None = None


def text(*, min_length: int = 0, pattern: str | None = None) -> Check:
    compiled = re.compile(pattern) if pattern is not None else None

    def check(value: object) -> object:
        if not isinstance(value, str):
            raise Invalid("string_type", "Input should be a valid string", value)
        if len(value) < min_length:
            plural = "" if min_length == 1 else "s"
            raise Invalid(
                "string_too_short",
                f"String should have at least {min_length} character{plural}",
                value,
            )
        if compiled is not None and compiled.search(value) is None:
            raise Invalid(
                "string_pattern_mismatch", f"String should match pattern '{pattern}'", value
            )
        return value

    return check


def integer(*, ge: int | None = None, le: int | None = None) -> Check:
    """A whole number (never a boolean, never a float, even ``1.0``) within ``ge``..``le``."""

    def check(value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid("int_type", "Input should be a valid integer", value)
        if ge is not None and value < ge:
            raise Invalid(
                "greater_than_equal", f"Input should be greater than or equal to {ge}", value
            )
        if le is not None and value > le:
            raise Invalid("less_than_equal", f"Input should be less than or equal to {le}", value)
        return value

    return check


def number(*, gt: int) -> Check:
    """A finite number above ``gt``, as a float (a whole number is accepted and converted)."""

    def check(value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                value = float(value)
            except OverflowError:
                raise Invalid("finite_number", "Input should be a finite number", value) from None
        if not isinstance(value, float):
            raise Invalid("float_type", "Input should be a valid number", value)
        if not math.isfinite(value):
            raise Invalid("finite_number", "Input should be a finite number", value)
        if not value > gt:
            raise Invalid("greater_than", f"Input should be greater than {gt}", value)
        return value

    return check


def boolean(value: object) -> object:
    if not isinstance(value, bool):
        raise Invalid("bool_type", "Input should be a valid boolean", value)
    return value


def choice(*choices: str) -> Check:
    """One of ``choices`` exactly."""
    shown = [repr(c) for c in choices]
    expected = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"

    def check(value: object) -> object:
        if not isinstance(value, str) or value not in choices:
            raise Invalid("literal_error", f"Input should be {expected}", value)
        return value

    return check


def optional(inner: Check) -> Check:
    """``None`` or what ``inner`` accepts."""

    def check(value: object) -> object:
        return None if value is None else inner(value)

    return check


def list_of(item: Check) -> Check:
    def check(value: object) -> object:
        if not isinstance(value, list):
            raise Invalid("list_type", "Input should be a valid list", value)
        out = []
        for index, entry in enumerate(value):
            try:
                out.append(item(entry))
            except Invalid as exc:
                raise exc.at(index) from None
        return out

    return check


def mapping_of(entry: Check) -> Check:
    """A table of string keys, each value checked by ``entry`` (a key's own problem is placed at
    ``(key, "[key]")``)."""

    def check(value: object) -> object:
        if not isinstance(value, dict):
            raise Invalid("dict_type", "Input should be a valid dictionary", value)
        out: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise Invalid("string_type", "Input should be a valid string", key).at(key, "[key]")
            try:
                out[key] = entry(item)
            except Invalid as exc:
                raise exc.at(key) from None
        return out

    return check


def table(name: str, fields: Mapping[str, Field], build: Callable[..., T]) -> Callable[[object], T]:
    """A check of a table with exactly ``fields`` (any other key is refused), handing the checked
    values, defaults filled in, to ``build`` by keyword. ``name`` is the table's name in the
    message for a value that is not a table at all."""
    order: Sequence[tuple[str, Field]] = tuple(fields.items())
    not_table = f"Input should be a valid dictionary or instance of {name}"

    def check(value: object) -> T:
        if not isinstance(value, dict):
            raise Invalid("model_type", not_table, value)
        out: dict[str, object] = {}
        for key, spec in order:
            if key not in value:
                if spec.default is REQUIRED:
                    raise Invalid("missing", "Field required", value).at(key)
                out[key] = spec.factory() if spec.factory is not None else spec.default
                continue
            try:
                out[key] = spec.check(value[key])
            except Invalid as exc:
                raise exc.at(key) from None
        for key, item in value.items():
            if not isinstance(key, str):
                raise Invalid("invalid_key", "Keys should be strings", key).at(key)
            if key not in fields:
                raise Invalid("extra_forbidden", "Extra inputs are not permitted", item).at(key)
        return build(**out)

    return check
