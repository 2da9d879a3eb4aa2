"""A child's final answer under a ``response_schema``: the schema checked once, the answer
parsed as strict JSON and validated against it.

Strict JSON: ``NaN``, ``Infinity`` and numbers too large for a float are refused, as no store
or wire can carry them; one surrounding Markdown code fence, as models often add, is removed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from membrane.errors import InvalidRequest

__all__ = ["parse_final", "schema_validator"]


def schema_validator(schema: Mapping[str, Any] | None) -> Validator | None:
    """The validator of ``schema`` (``None``: no schema); ``InvalidRequest`` when it is not
    plain JSON or not valid JSON Schema."""
    if schema is None:
        return None
    if not isinstance(schema, Mapping):
        raise InvalidRequest(
            f"response_schema must be a JSON Schema object, got {type(schema).__name__}"
        )
    try:
        plain = json.loads(json.dumps(schema))
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"response_schema is not plain JSON: {exc}") from exc
    try:
        cls = validator_for(plain)
        cls.check_schema(plain)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "(root)"
        raise InvalidRequest(
            f"response_schema is not valid JSON Schema at {where}: {exc.message}", path=where
        ) from exc
    validator: Validator = cls(plain)
    return validator


def parse_final(validator: Validator | None, text: str) -> tuple[Any, tuple[str, str] | None]:
    """The final answer parsed and checked against ``validator`` (``None``: no schema, no
    parse): the value and ``None``, or ``None`` and the problem (a JSON path, a reason)."""
    if validator is None:
        return None, None
    try:
        value = json.loads(_unfenced(text), parse_constant=_refuse, parse_float=_finite)
    except json.JSONDecodeError as exc:
        return None, ("$", f"the answer is not JSON ({exc.msg}, line {exc.lineno})")
    except _NotJson as exc:
        return None, ("$", f"the answer is not JSON ({exc})")
    error = best_match(validator.iter_errors(value))
    if error is not None:
        reason = error.message
        return None, (error.json_path, reason if len(reason) <= 300 else reason[:297] + "...")
    return value, None


class _NotJson(ValueError):
    """A value Python's parser accepts but JSON has not: ``NaN``, ``Infinity``, ``1e999``."""


def _refuse(token: str) -> Any:
    raise _NotJson(f"{token} is not a JSON value; use a number or null")


def _finite(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _NotJson(f"{token} is too large for a JSON number")
    return value


def _unfenced(text: str) -> str:
    """``text`` without one surrounding Markdown code fence, as models often add."""
    body = text.strip()
    if body.startswith("```") and body.endswith("```") and len(body) >= 6:
        body = body[3:-3]
        newline = body.find("\n")
        if newline != -1 and not body[:newline].strip().startswith(("{", "[")):
            body = body[newline + 1 :]
    return body
