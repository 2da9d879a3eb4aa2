"""What a model spec names, without building anything: ``resolve_spec`` (the provider and model
a spec means, or ``unknown-model``) and ``model_view`` (what ``explain`` shows). The spec forms
are listed in :mod:`membrane.models.specs`, which builds the models and re-exports these names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from membrane.config.values import ModelEntry, Settings
from membrane.errors import UnknownModel

__all__ = ["PROVIDERS", "ModelChoice", "Provider", "known_names", "model_view", "resolve_spec"]

PROVIDERS = ("scripted", "openai", "anthropic")
Provider = Literal["scripted", "openai", "anthropic"]


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """What a spec resolves to. ``via`` says how: ``spec``, ``entry:NAME`` or ``alias:NAME``."""

    spec: str
    provider: Provider
    model: str
    via: str
    entry: ModelEntry

    def to_dict(self) -> dict[str, str | None]:
        return {
            "spec": self.spec,
            "provider": self.provider,
            "model": self.model,
            "via": self.via,
            "base_url": self.entry.base_url,
        }


def resolve_spec(
    spec: str,
    *,
    models: Mapping[str, ModelEntry] | None = None,
    aliases: Mapping[str, str] | None = None,
) -> ModelChoice:
    """The provider and model ``spec`` names; ``UnknownModel`` when it names nothing known."""
    models = models or {}
    aliases = aliases or {}
    text = spec.strip() if isinstance(spec, str) else ""
    if not text:
        raise UnknownModel(
            f"model spec {spec!r} is empty", spec=str(spec), known=known_names(models, aliases)
        )
    folded = {alias.casefold(): alias for alias in aliases}
    if text in aliases or text.casefold() in folded:
        target = aliases[text if text in aliases else folded[text.casefold()]].strip()
        if target in aliases:
            raise UnknownModel(
                f"model alias {text!r} points at another alias ({target!r}); an alias must "
                "name a provider:model spec or a [models] entry",
                spec=text,
                known=known_names(models, aliases),
            )
        choice = resolve_spec(target, models=models)
        return ModelChoice(text, choice.provider, choice.model, f"alias:{text}", choice.entry)
    if text in models:
        entry = models[text]
        return ModelChoice(text, entry.provider, entry.model, f"entry:{text}", entry)
    provider, sep, rest = text.partition(":")
    if sep and provider in PROVIDERS and rest.strip():
        entry = ModelEntry(provider=provider, model=rest.strip())  # type: ignore[arg-type]
        return ModelChoice(text, entry.provider, entry.model, "spec", entry)
    known = known_names(models, aliases)
    if sep and provider not in PROVIDERS:
        why = f"unknown provider {provider!r} (the providers are {', '.join(PROVIDERS)})"
    else:
        why = "not a provider:MODEL spec, a [model_aliases] alias or a [models] entry"
    listed = f"; known names: {', '.join(known)}" if known else ""
    raise UnknownModel(f"model {text!r}: {why}{listed}", spec=text, known=known)


def known_names(models: Mapping[str, ModelEntry], aliases: Mapping[str, str]) -> list[str]:
    return sorted({*models, *aliases})


def model_view(spec: object, source: str, settings: Settings) -> dict[str, object]:
    """What ``explain`` shows of a child's model: the spec, where it came from, and the
    provider and model it resolves to (or the error a start would raise). Pure: no SDK, no key.

    ``spec`` ``None`` means the run's default: the host's ``--model``, else ``default_model``.
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
    try:
        choice = resolve_spec(str(spec), models=settings.models, aliases=settings.model_aliases)
    except UnknownModel as exc:
        view["error"] = exc.to_dict()
        return view
    view.update(choice.to_dict())
    view["source"] = view.pop("source")  # keep the order: spec, provider, ..., source
    return view
