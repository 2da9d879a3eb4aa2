"""The model a command runs with: ``--model``, else the settings' ``default_model``, else the
model the started agent's own file names (its ``model:``).

One place for the rule, used by ``membrane run``/``resume`` in process and by the machine
runtime (``membrane serve``) for the runs it starts, so both pick the same model for the same
spec and settings.
"""

from __future__ import annotations

from pathlib import Path

from membrane.agents.definition import AgentDefinition, Unset
from membrane.config.model_names import resolve_spec
from membrane.config.values import Settings
from membrane.errors import InvalidRequest, UnknownModel
from membrane.models.specs import ModelRouter
from membrane.models.wire_log import WireLog

__all__ = ["absolute_spec", "parse_model"]


def parse_model(
    spec: str | None,
    settings: Settings | None = None,
    /,
    *,
    agent: AgentDefinition | None = None,
    requests: Path | None = None,
) -> ModelRouter:
    """The model ``--model`` names (else the settings' ``default_model``), as a router that
    also answers the specs definitions and calls name (see docs/models.md).

    With neither, the router has no default: an agent whose file names its own ``model:`` runs
    on it (frontmatter wins anyway, DESIGN rule 1), and ``agent``, the definition a top-level
    run starts, is checked here so that one naming no model is refused before any run.

    ``invalid-request`` (no model anywhere), ``unknown-model``, ``model-auth-failed`` (a missing
    key) and ``extra-not-installed`` are raised here, before any run. ``requests``: the folder
    every model built logs its requests to (``membrane.models.wire_log``), ``None`` for none."""
    settings = settings or Settings()
    if spec is None and settings.default_model is None and agent is not None:
        own = agent.model
        if isinstance(own, Unset) or own.strip().lower() == "inherit":
            raise InvalidRequest(
                f"no model for {agent.name!r}: its file names none (model:), so pass --model "
                "(scripted:PATH, openai:MODEL, anthropic:MODEL or a [models] name), set "
                "default_model in the settings, or add model: to the file (see docs/models.md)",
                field="model",
            )
        if settings.unknown_model == "fallback" and not servable(own, settings):
            raise InvalidRequest(
                f"no model for {agent.name!r}: its file's model {own!r} is one no provider here "
                "serves, so it falls back to the run's default model, and none is set: pass "
                "--model or set default_model in the settings (see docs/models.md)",
                field="model",
            )
    log = WireLog(requests) if requests is not None else None
    return ModelRouter.from_settings(settings, default=spec, request_log=log)


def servable(spec: str, settings: Settings) -> bool:
    """Whether a provider here serves ``spec`` (an alias, an entry, a spec or a product's name)."""
    try:
        resolve_spec(spec, models=settings.models, aliases=settings.model_aliases)
    except UnknownModel:
        return False
    return True


def absolute_spec(spec: str | None) -> str | None:
    """``spec`` with a relative ``scripted:PATH`` made absolute (from this process's folder),
    so that another process (the machine runtime) reads the same script."""
    if spec is None or not spec.startswith("scripted:"):
        return spec
    path = spec.removeprefix("scripted:")
    if not path or Path(path).is_absolute():
        return spec
    return "scripted:" + str(Path(path).absolute())
