"""The model an agent's file resolves to here, and whether it can start: what ``membrane agents
list`` and ``membrane agents validate`` show of each agent (computed as ``explain`` does)."""

from __future__ import annotations

from membrane.agents.definition import AgentDefinition, Unset
from membrane.config.values import Settings
from membrane.models.naming import model_view
from membrane.resolve.invocation import CallParams, resolve_invocation
from membrane.resolve.warnings import warning_objects

__all__ = ["agent_model"]


def agent_model(definition: AgentDefinition, settings: Settings) -> dict[str, object]:
    """``{written, spec, provider, model, via, source, fallback, can_start, reason}``: the model
    the file names (``written``), the spec and provider it resolves to with no ``--model`` (the
    run's default model for ``inherit``, no model, or a model that falls back), and whether it
    can start here; ``reason`` says why not (``None`` when it can)."""
    fields, warnings = resolve_invocation(
        definition,
        CallParams(),
        parent_model=None,
        parent_permission=settings.permission_mode,
        settings=settings,
    )
    model = fields["model"]
    view = model_view(model.value, model.source, settings)
    found = warning_objects(warnings, (), file=definition.path)
    fallback = next((w for w in found if w["code"] == "model-fallback"), None)
    written = None if isinstance(definition.model, Unset) else definition.model
    out: dict[str, object] = {
        "written": written,
        "spec": view.get("spec"),
        "provider": view.get("provider"),
        "model": view.get("model"),
        "via": view.get("via"),
        "source": view.get("source"),
        "fallback": fallback,
        "can_start": True,
        "reason": None,
    }
    error = view.get("error")
    if isinstance(error, dict):
        out.update(can_start=False, reason=str(error.get("message")))
    elif view.get("provider") is None:
        what = (
            f"its model {written!r} falls back to the run's default model"
            if fallback is not None
            else "its file names no model"
            if written is None
            else f"model: {written} takes the run's default model"
        )
        out.update(
            can_start=False,
            reason=f"{what}, and none is set: pass --model to membrane run or set "
            "default_model in the settings (see docs/models.md)",
        )
    return out
