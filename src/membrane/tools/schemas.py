"""Checking a tool's input schema once, at registration: the meta-schema and every ``$ref``.

A schema that is valid JSON Schema can still point nowhere (``{"$ref": "#/$defs/missing"}``):
the meta-schema does not know which definitions exist, and the validator only finds out when a
call reaches that keyword. So every ``$ref`` is looked up here too, with the same ``referencing``
machinery the validator uses, against the schema itself and the JSON Schema meta-schemas only:
nothing is fetched over the network, at registration or later.

The result is cached by the schema's canonical JSON text (``json.dumps(..., sort_keys=True)``):
MCP servers and extensions repeat the same schemas across many tools, and the meta-schema check
costs about a millisecond, so a repeated schema is checked once per process.

A schema written only with the plain keywords of ``_plainly_valid`` (typed properties, bounds,
``enum``, ``required``, descriptions: what the built-in tools and most MCP servers use) is valid
under the default dialect by construction, so it is accepted without importing the JSON Schema
libraries at all; anything else (a ``$schema``, a reference, a combinator, a ``pattern``) goes
through the full check above.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["SchemaProblem", "schema_problem"]

#: Past this many distinct schemas the cache starts over (it only saves time, never decides).
_CACHE_SIZE = 16_384

_checked: dict[str, SchemaProblem | None] = {}


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """Why a schema was refused: where (a ``/``-joined path, ``(root)`` at the top) and what."""

    where: str
    what: str


def schema_problem(plain: dict[str, Any]) -> SchemaProblem | None:
    """The first problem with the JSON-shaped schema ``plain``, or ``None`` when it is usable."""
    try:
        key = json.dumps(plain, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return SchemaProblem("(root)", f"it is not JSON data ({exc})")
    if key in _checked:
        return _checked[key]
    problem = None if _plainly_valid(plain) else _check(plain)
    if len(_checked) >= _CACHE_SIZE:
        _checked.clear()
    _checked[key] = problem
    return problem


def _check(plain: dict[str, Any]) -> SchemaProblem | None:
    """The meta-schema and ``$ref`` check (``membrane.tools.schema_check``, imported only for
    a schema that is not plainly valid)."""
    from membrane.tools.schema_check import first_problem

    found = first_problem(plain)
    return None if found is None else SchemaProblem(*found)


_TYPES: Final = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_TEXT_KEYWORDS: Final = frozenset({"title", "description", "format"})
_ANY_KEYWORDS: Final = frozenset({"const", "default"})
_LIST_KEYWORDS: Final = frozenset({"enum", "examples"})
_NUMBER_KEYWORDS: Final = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_COUNT_KEYWORDS: Final = frozenset(
    {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
)
_FLAG_KEYWORDS: Final = frozenset({"uniqueItems", "readOnly", "writeOnly", "deprecated"})
_SUBSCHEMA_KEYWORDS: Final = frozenset({"items", "additionalProperties"})


def _plainly_valid(node: object) -> bool:
    """Whether ``node`` is a schema of the default dialect (2020-12) that uses only keywords
    whose values are checked here exactly as its meta-schema checks them: every other keyword
    (``$schema``, ``$ref``, ``$defs``, ``anyOf``, ``pattern``, ...) answers ``False``, which
    sends the schema to the full check; ``True`` is never wrong."""
    if isinstance(node, bool):
        return True
    if not isinstance(node, dict):
        return False
    for keyword, value in node.items():
        if keyword == "type":
            if isinstance(value, str):
                if value not in _TYPES:
                    return False
            elif not (
                isinstance(value, list)
                and value
                and all(isinstance(t, str) and t in _TYPES for t in value)
                and len(set(value)) == len(value)
            ):
                return False
        elif keyword == "properties":
            if not isinstance(value, dict) or not all(map(_plainly_valid, value.values())):
                return False
        elif keyword == "required":
            if not (
                isinstance(value, list)
                and all(isinstance(name, str) for name in value)
                and len(set(value)) == len(value)
            ):
                return False
        elif keyword in _SUBSCHEMA_KEYWORDS:
            if not _plainly_valid(value):
                return False
        elif keyword in _TEXT_KEYWORDS:
            if not isinstance(value, str):
                return False
        elif keyword in _NUMBER_KEYWORDS:
            if isinstance(value, bool) or not isinstance(value, int | float):
                return False
        elif keyword in _COUNT_KEYWORDS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return False
        elif keyword in _FLAG_KEYWORDS:
            if not isinstance(value, bool):
                return False
        elif keyword in _LIST_KEYWORDS:
            if not isinstance(value, list):
                return False
        elif keyword not in _ANY_KEYWORDS:
            return False
    return True
