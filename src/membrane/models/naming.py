"""What a model spec names, without building anything: ``resolve_spec`` (the provider and model
a spec means, or ``unknown-model``; it lives in :mod:`membrane.config.model_names`, where the
resolver reads it too) and ``model_view`` (what ``explain`` shows). The spec forms are listed in
:mod:`membrane.models.specs`, which builds the models and re-exports these names.
"""

from __future__ import annotations

from membrane.config.model_names import (
    PROVIDERS,
    ModelChoice,
    Provider,
    known_names,
    plan_pair,
    product_spec,
    resolve_spec,
)
from membrane.config.values import Settings
from membrane.errors import UnknownModel

__all__ = [
    "PROVIDERS",
    "ModelChoice",
    "Provider",
    "known_names",
    "model_view",
    "product_spec",
    "resolve_spec",
]


def model_view(
    spec: object, source: str, settings: Settings, *, planning: bool = False
) -> dict[str, object]:
    """What ``explain`` shows of a child's model: the spec, where it came from, and the
    provider and model it resolves to (or the error a start would raise). Pure: no SDK, no key.

    ``spec`` ``None`` means the run's default: the host's ``--model``, else ``default_model``;
    a ``default_model`` that chooses by the permission mode (``opusplan``) is its planning model
    for a ``planning`` child (permission mode ``plan``) and its other model otherwise.
    """
    view: dict[str, object] = {"spec": spec, "source": source}
    if spec is None:
        if settings.default_model is None:
            view["provider"] = None
            view["note"] = "the model the host runs on (membrane run --model)"
            return view
        spec = settings.default_model
        view.update(spec=spec, source="settings:default_model")
        view["note"] = "unless the host passes --model"
        named = spec.strip()
        own = named in settings.models or named in settings.model_aliases  # an entry wins
        pair = None if own else plan_pair(named)
        if pair is not None:
            spec = pair[0 if planning else 1]
            view["spec"] = spec
            view["note"] = f"{named} in the {'plan' if planning else 'current'} permission mode"
    try:
        choice = resolve_spec(str(spec), models=settings.models, aliases=settings.model_aliases)
    except UnknownModel as exc:
        view["error"] = exc.to_dict()
        return view
    view.update(choice.to_dict())
    view["source"] = view.pop("source")  # keep the order: spec, provider, ..., source
    return view
