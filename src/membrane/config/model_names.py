"""What a model spec names, without building anything: the providers, the product names other
products' files use (``sonnet``, ``anthropic/claude-sonnet-5-5``), and ``resolve_spec``, the
provider and model a spec means (or ``unknown-model``). Pure: the resolver reads it to decide a
file's model falls back, ``membrane.models.naming`` re-exports it for ``explain`` and the router.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

from membrane.config.values import ModelEntry
from membrane.errors import ModelNotAllowed, UnknownModel

__all__ = [
    "ONE_MILLION",
    "PLAN_MODELS",
    "PRODUCT_MODELS",
    "PROVIDERS",
    "SLASH_PROVIDERS",
    "ModelChoice",
    "Provider",
    "check_allowed",
    "known_names",
    "plan_model",
    "plan_pair",
    "product_spec",
    "resolve_spec",
]

PROVIDERS = ("scripted", "openai", "anthropic")
Provider = Literal["scripted", "openai", "anthropic"]

#: Claude Code's model names (any case) and the Anthropic model each stands for here; a
#: ``[model_aliases]`` or ``[models]`` entry of the same name wins.
PRODUCT_MODELS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "sonnet": "anthropic:claude-sonnet-5-5",
        "opus": "anthropic:claude-opus-5-5",
        "haiku": "anthropic:claude-haiku-5-5",
        # Claude Code's ``opusplan``: Opus while planning, Sonnet otherwise (``plan_model``).
        "opusplan": "anthropic:claude-sonnet-5-5",
    }
)
#: Claude Code's names that choose a model by the permission mode: (while planning, otherwise).
PLAN_MODELS: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {"opusplan": ("opus", "sonnet")}
)
#: Claude Code's suffix for a model's 1M-token context window (``sonnet[1m]``).
ONE_MILLION: Final = "[1m]"
#: OpenCode's and pi's ``provider/model`` ids read as ``provider:model`` for these providers.
SLASH_PROVIDERS: Final = ("anthropic", "openai")
#: A bare model id (pi, Claude Code) of these families names its provider's model.
_BARE_PREFIXES: Final = (("claude-", "anthropic"), ("gpt-", "openai"))


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """What a spec resolves to. ``via`` says how: ``spec``, ``entry:NAME``, ``alias:NAME`` or
    ``product:NAME`` (a name another product uses, read by ``product_spec``)."""

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


def product_spec(name: str) -> str | None:
    """The ``provider:model`` spec another product's model name means here, or ``None``:
    ``sonnet``/``opus``/``haiku``/``opusplan`` (any case), ``anthropic/MODEL`` and
    ``openai/MODEL``, and a bare ``claude-...`` or ``gpt-...`` model id. Claude Code's ``[1m]``
    suffix (``sonnet[1m]``, ``claude-sonnet-5-5[1m]``) names the same model: Membrane does not
    ask for the 1M-token context window."""
    text = name.strip()
    if text.casefold().endswith(ONE_MILLION) and len(text) > len(ONE_MILLION):
        text = text[: -len(ONE_MILLION)].strip()
    mapped = PRODUCT_MODELS.get(text.casefold())
    if mapped is not None:
        return mapped
    provider, sep, model = text.partition("/")
    if sep and provider.casefold() in SLASH_PROVIDERS and model.strip():
        return f"{provider.casefold()}:{model.strip()}"
    for prefix, owner in _BARE_PREFIXES:
        if text.casefold().startswith(prefix) and len(text) > len(prefix) and "/" not in text:
            return f"{owner}:{text}"
    return None


def plan_model(name: object, *, planning: bool) -> str | None:
    """What a name that chooses its model by the permission mode (``opusplan``) means for an
    agent that plans (permission mode ``plan``) or not; ``None`` for any other name."""
    if not isinstance(name, str):
        return None
    pair = PLAN_MODELS.get(name.strip().casefold())
    if pair is None:
        return None
    return pair[0] if planning else pair[1]


def plan_pair(name: str) -> tuple[str, str] | None:
    """The (while planning, otherwise) models of a name that chooses by the permission mode
    (``opusplan``), or ``None`` for any other name."""
    return PLAN_MODELS.get(name.strip().casefold())


def resolve_spec(
    spec: str,
    *,
    models: Mapping[str, ModelEntry] | None = None,
    aliases: Mapping[str, str] | None = None,
) -> ModelChoice:
    """The provider and model ``spec`` names; ``UnknownModel`` when it names nothing known.

    In order: a ``[model_aliases]`` alias (exact, then any case), a ``[models]`` entry, a
    ``provider:MODEL`` spec, a product's name (``product_spec``)."""
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
    mapped = product_spec(text)
    if mapped is not None:
        provider, _, rest = mapped.partition(":")
        entry = ModelEntry(provider=provider, model=rest)  # type: ignore[arg-type]
        return ModelChoice(text, entry.provider, entry.model, f"product:{text}", entry)
    known = known_names(models, aliases)
    if sep and provider not in PROVIDERS:
        why = f"unknown provider {provider!r} (the providers are {', '.join(PROVIDERS)})"
    else:
        why = (
            "not a provider:MODEL spec, a [model_aliases] alias, a [models] entry or a "
            "product's name (sonnet, opus, haiku, anthropic/MODEL, openai/MODEL)"
        )
    listed = f"; known names: {', '.join(known)}" if known else ""
    raise UnknownModel(f"model {text!r}: {why}{listed}", spec=text, known=known)


def known_names(models: Mapping[str, ModelEntry], aliases: Mapping[str, str]) -> list[str]:
    return sorted({*models, *aliases})


def check_allowed(
    spec: str,
    allowed: Sequence[str] | None,
    *,
    models: Mapping[str, ModelEntry] | None = None,
    aliases: Mapping[str, str] | None = None,
) -> None:
    """Refuse ``spec`` (``model-not-allowed``) when ``allowed`` (the settings'
    ``allowed_models``) is a list that does not hold it: listed as written, or naming the same
    provider, model and base URL as a listed name. ``None`` allows every model; a spec that
    names nothing known is left to ``resolve_spec``'s own ``unknown-model``."""
    if allowed is None:
        return
    if spec.strip() in allowed:
        return
    try:
        choice = resolve_spec(spec, models=models, aliases=aliases)
    except UnknownModel:
        return
    for name in allowed:
        try:
            listed = resolve_spec(name, models=models, aliases=aliases)
        except UnknownModel:
            continue
        if _same_model(listed, choice):
            return
    shown = ", ".join(allowed) if allowed else "(none)"
    raise ModelNotAllowed(
        f"model {spec.strip()!r} ({choice.provider}:{choice.model}) is not in the settings' "
        f"allowed_models: {shown}",
        spec=spec.strip(),
        model=f"{choice.provider}:{choice.model}",
        allowed=list(allowed),
    )


def _same_model(one: ModelChoice, other: ModelChoice) -> bool:
    return (one.provider, one.model, one.entry.base_url) == (
        other.provider,
        other.model,
        other.entry.base_url,
    )
