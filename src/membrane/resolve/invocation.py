"""Spawn-time fields: ``frontmatter ?? call ?? default``, each value with its deciding source.

The call parameters come from a tool call, an RPC payload or ``--call`` JSON, so
``CallParams.from_mapping`` is the boundary where untrusted input is checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final, Generic, Literal, TypeVar

from membrane.agents.definition import UNSET, AgentDefinition, DefinitionWarning, Isolation, Unset
from membrane.config.model_names import resolve_spec
from membrane.config.values import Settings
from membrane.errors import UnknownModel
from membrane.limits import check_depth, child_depth
from membrane.vocabulary import SPAWN_FIELDS

__all__ = [
    "INVOCATION_FIELDS",
    "RUN_ID_PLACEHOLDER",
    "CallParams",
    "Checkout",
    "Source",
    "Sourced",
    "agent_depth",
    "resolve_checkout",
    "resolve_invocation",
    "worktrees_folder",
]

T = TypeVar("T")

#: Who decided a value: ``frontmatter``, ``call``, ``deployment``, ``default``, ``parent``, or
#: ``dialect:NAME`` for a field another product's file set (``dialect:claude-code``).
Source = str

#: Stands for the worktree's folder name, which the runtime picks from the run id at the start.
RUN_ID_PLACEHOLDER: Final = "<run-id>"

#: The fields ``EffectiveAuthority.invocation`` carries, in display order.
INVOCATION_FIELDS: tuple[str, ...] = (*SPAWN_FIELDS, "permission")


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
        from membrane.resolve.call_params import call_values  # not needed without parameters

        return cls(**call_values(data, where=where))  # type: ignore[arg-type]


def agent_depth(parent_depth: int, depth: int | None) -> int:
    """The agent's depth: ``depth`` when given (``0`` for a top-level agent), else
    ``parent_depth + 1``. Either must be a non-negative safe integer, never a boolean or a
    float (seed 001: every public entry validates the domain); else ``InvalidDepth``."""
    if depth is None:
        check_depth(parent_depth, what="parent.depth", exact=True)
        return child_depth(parent_depth, what="parent.depth")
    return check_depth(depth, what="depth", exact=True)


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
    fallbacks: tuple[str, ...] = ()
    if model.value == "inherit":
        resolved_model: Sourced[object] = Sourced(parent_model, "parent")
    else:
        name = _model_name(model, definition, settings, warnings)
        # A fallback is the deployment's choice: the run's default model.
        resolved_model = Sourced(name, model.source if name is not None else "deployment")
        if name is not None:
            fallbacks = _fallbacks(model, definition, settings)

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
        # Definition-only: no call parameter; ``None`` sends none (the provider's default).
        "tool_choice": _pick(definition.tool_choice, UNSET, None, "default"),
    }
    if fallbacks:
        # Only when there are some: the models tried in order when the first one fails in a
        # way another model can fix (``membrane.models.fallback``).
        fields["fallback_models"] = Sourced(fallbacks, resolved_model.source)
    # A field another product's file set is that dialect's reading of the file.
    for name, sourced in fields.items():
        if sourced.source == "frontmatter":
            fields[name] = Sourced(sourced.value, definition.source_of(name))
    return fields, warnings


def _fallbacks(
    model: Sourced[str], definition: AgentDefinition, settings: Settings
) -> tuple[str, ...]:
    """The fallbacks of the chosen model: the definition's list (``model: [a, b]``) when the
    model is the file's, else those of a list alias it names (``fast = ["a", "b"]``)."""
    if model.source == "frontmatter" and definition.fallback_models is not UNSET:
        return definition.fallback_models
    alias = settings.alias_name(model.value)
    return () if alias is None else settings.alias_fallbacks.get(alias, ())


def _model_name(
    model: Sourced[str], definition: AgentDefinition, settings: Settings, warnings: list[str]
) -> str | None:
    """A model alias (``[model_aliases]``) replaced by what it stands for; a file's model no
    provider here serves (``resolve_spec`` refuses it) is ``None``, the run's default model,
    with a ``model-fallback`` warning naming the file and line, unless the deployment says
    ``unknown_model = "error"``. A model the call names is kept: the start is strict about it.
    A product's name (``sonnet``, ``openai/gpt-5``) is kept as written: the router reads it."""
    aliased = settings.model_alias(model.value)
    if aliased is not None:
        return aliased
    if model.source != "frontmatter" or settings.unknown_model == "error":
        return model.value
    try:
        resolve_spec(model.value, models=settings.models, aliases=settings.model_aliases)
    except UnknownModel as exc:
        default = settings.default_model
        runs_on = (
            f"the host's --model, else default_model ({default})"
            if default is not None
            else "the host's --model (no default_model is set)"
        )
        warnings.append(
            str(
                DefinitionWarning(
                    definition.path,
                    definition.lines.get("model"),
                    "model-fallback",
                    f"{exc.message}; no provider here serves it, so the agent runs on the "
                    f'run\'s default model: {runs_on} (unknown_model = "error" refuses '
                    "instead)",
                )
            )
        )
        return None
    return model.value


@dataclass(frozen=True, slots=True)
class Checkout:
    """Where the child works: the ``main`` checkout, or a ``worktree`` the runtime must create
    (strictly: no fallback).

    ``path`` is the child's working folder. For a worktree it is a placeholder,
    ``<worktrees>/<run-id>[/<project subfolder>]``: the runtime creates the worktree in
    ``worktrees`` (``<project>/.membrane/worktrees``), names its folder after the run id, and the
    child works at the project's place inside it. The runtime replaces ``path`` with the real
    folder wherever the prompt names it.
    """

    kind: Literal["main", "worktree"]
    path: str | None
    worktrees: str | None = None


def worktrees_folder(project: str | None) -> str:
    """``<project>/.membrane/worktrees``: the folder a child's worktree is created in."""
    return str(PurePosixPath(project or "<project>") / ".membrane" / "worktrees")


def resolve_checkout(
    isolation: object, *, project: str | None, cwd: str | None, subfolder: str = ""
) -> tuple[Checkout, str]:
    """The checkout and how the prompt names the working folder.

    ``subfolder`` is the project's place inside its Git repository; a worktree holds the whole
    repository, so the child works in that subfolder of it.
    """
    if isolation == "worktree":
        folder = worktrees_folder(project)
        path = PurePosixPath(folder) / RUN_ID_PLACEHOLDER
        inner = subfolder.strip("/")
        if inner:
            path /= inner
        where = f"{path} (in a detached Git worktree created from HEAD)"
        return Checkout("worktree", str(path), folder), where
    base = project or cwd
    return Checkout("main", base), base or "the current working folder"
