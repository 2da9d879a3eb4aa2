"""Spawn-time fields: ``frontmatter ?? call ?? default``, each value with its deciding source.

The call parameters come from a tool call, an RPC payload or ``--call`` JSON, so
``CallParams.from_mapping`` is the boundary where untrusted input is checked.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Generic, Literal, TypeVar

from membrane.agents.definition import UNSET, AgentDefinition, Isolation, Unset
from membrane.errors import InvalidRequest
from membrane.settings import Settings

__all__ = [
    "INVOCATION_FIELDS",
    "CallParams",
    "Checkout",
    "Source",
    "Sourced",
    "resolve_checkout",
    "resolve_invocation",
]

T = TypeVar("T")

Source = Literal["frontmatter", "call", "deployment", "default", "parent"]

#: The fields ``EffectiveAuthority.invocation`` carries, in display order.
INVOCATION_FIELDS: tuple[str, ...] = (
    "model",
    "thinking",
    "max_turns",
    "inherit_context",
    "run_in_background",
    "isolated",
    "isolation",
    "permission",
)


@dataclass(frozen=True, slots=True)
class Sourced(Generic[T]):
    """An effective value and who decided it."""

    value: T
    source: Source


@dataclass(frozen=True, slots=True)
class CallParams:
    """What one delegation call asks for. ``UNSET`` means the caller did not ask."""

    model: str | Unset = UNSET
    thinking: str | Unset = UNSET
    max_turns: int | Unset = UNSET
    inherit_context: bool | Unset = UNSET
    run_in_background: bool | Unset = UNSET
    isolated: bool | Unset = UNSET
    isolation: Isolation | Unset = UNSET
    description: str | None = None

    @classmethod
    def from_mapping(cls, data: object, *, where: str = "call") -> CallParams:
        """Check untrusted call parameters; a JSON ``null`` counts as not given.

        Raises ``InvalidRequest`` naming the field (``where.field``), what was expected and
        what arrived.
        """
        if not isinstance(data, Mapping):
            raise InvalidRequest(
                f"{where}: expected a JSON object of call parameters, got {_kind(data)}",
                field=None,
            )
        values: dict[str, object] = {}
        for key, value in data.items():
            if not isinstance(key, str) or key not in _CALL_FIELDS:
                close = difflib.get_close_matches(str(key), _CALL_FIELDS, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise InvalidRequest(
                    f"{where}: unknown call parameter {key!r}{hint} "
                    f"(known: {', '.join(_CALL_FIELDS)})",
                    field=str(key),
                )
            if value is None:
                continue
            values[key] = _check(key, value, where=where)
        return cls(**values)  # type: ignore[arg-type]


_CALL_FIELDS: tuple[str, ...] = (
    "model",
    "thinking",
    "max_turns",
    "inherit_context",
    "run_in_background",
    "isolated",
    "isolation",
    "description",
)
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
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
        expected = "a whole number of at least 1"
    else:  # isolation
        if value in ("off", "worktree"):
            return value
        expected = '"off" or "worktree"'
    raise InvalidRequest(f"{where}.{key}: expected {expected}, got {_kind(value)}", field=key)


def _pick(
    frontmatter: T | Unset, call: T | Unset, default: T, default_source: Source
) -> Sourced[T]:
    if frontmatter is not UNSET:
        return Sourced(frontmatter, "frontmatter")
    if call is not UNSET:
        return Sourced(call, "call")
    return Sourced(default, default_source)


def resolve_invocation(
    definition: AgentDefinition,
    call: CallParams,
    *,
    parent_model: str | None,
    parent_permission: str,
    settings: Settings,
) -> tuple[dict[str, Sourced[object]], list[str]]:
    """Resolve every spawn-time field; returns the fields and warnings.

    ``model: inherit`` is a value like any other, so in frontmatter it locks the child to the
    parent's model and the caller cannot choose; in a call it asks for the parent's model.
    ``isolation: off`` in frontmatter outranks a caller's ``worktree`` (a veto). A worktree in a
    deployment with ``worktrees_enabled = false`` resolves to ``off`` with source
    ``deployment`` and a warning: it was never allowed, so strict creation does not apply.
    """
    warnings: list[str] = []
    model = _pick(definition.model, call.model, "inherit", "default")
    if model.value == "inherit":
        resolved_model: Sourced[object] = Sourced(parent_model, "parent")
    else:
        resolved_model = Sourced(model.value, model.source)

    if definition.max_turns is UNSET and call.max_turns is UNSET:
        default_turns = settings.default_max_turns
        max_turns: Sourced[object] = Sourced(
            default_turns, "deployment" if default_turns is not None else "default"
        )
    else:
        max_turns = _pick(definition.max_turns, call.max_turns, None, "default")

    isolation: Sourced[object] = _pick(definition.isolation, call.isolation, "off", "default")
    if isolation.value == "worktree" and not settings.worktrees_enabled:
        warnings.append(
            f"isolation: worktree ({isolation.source}) is not allowed here: worktrees are "
            "disabled in this deployment (worktrees_enabled = false); the child runs in the "
            "main checkout"
        )
        isolation = Sourced("off", "deployment")

    if definition.permission is UNSET or definition.permission == "inherit":
        permission: Sourced[object] = Sourced(parent_permission, "parent")
    else:
        permission = Sourced(definition.permission, "frontmatter")

    fields: dict[str, Sourced[object]] = {
        "model": resolved_model,
        "thinking": _pick(definition.thinking, call.thinking, None, "default"),
        "max_turns": max_turns,
        "inherit_context": _pick(
            definition.inherit_context, call.inherit_context, False, "default"
        ),
        "run_in_background": _pick(
            definition.run_in_background, call.run_in_background, False, "default"
        ),
        "isolated": _pick(definition.isolated, call.isolated, False, "default"),
        "isolation": isolation,
        "permission": permission,
    }
    return fields, warnings


@dataclass(frozen=True, slots=True)
class Checkout:
    """``main``, or a ``worktree`` the isolation step must create (strictly: no fallback)."""

    kind: Literal["main", "worktree"]
    path: str | None


def resolve_checkout(
    isolation: object, *, project: str | None, cwd: str | None
) -> tuple[Checkout, str]:
    """The checkout and how the prompt names the working folder. The worktree's run id is
    not known before the start, so its path ends in ``<run-id>``."""
    base = project or cwd
    if isolation == "worktree":
        root = PurePosixPath(base) if base else PurePosixPath("<project>")
        path = str(root / ".membrane" / "worktrees" / "<run-id>")
        folder = f"{path} (a detached Git worktree created from HEAD)"
        return Checkout("worktree", path), folder
    return Checkout("main", base), base or "the current working folder"
