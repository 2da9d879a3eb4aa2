"""Model specs: the one way a model is named, from ``--model`` to a definition's ``model:``.

A spec is one of

* ``scripted:PATH``: a ``ScriptedModel`` replaying the YAML script at PATH;
* ``openai:MODEL``: ``OpenAIModel`` (``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` as the SDK reads);
* ``anthropic:MODEL``: ``AnthropicModel`` (``ANTHROPIC_API_KEY``);
* the name of a ``[models.NAME]`` entry in the settings;
* the name of a ``[model_aliases]`` alias, whose value is one of the forms above.

``resolve_spec`` says what a spec means (pure, no SDK import); ``build_model`` builds it;
``ModelRouter`` is the ``Model`` a deployment runs on: it answers each request with the model its
``ModelRequest.model`` names (a definition's or a call's spec) or, when that is ``None``, its
default, building each model once. ``bind()`` builds the model for a spec at once, so an unknown
name (``unknown-model``), a missing key (``model-auth-failed``) or a missing SDK
(``extra-not-installed``) is refused before any request.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from membrane._record import frozen
from membrane.config.values import ModelEntry, Settings
from membrane.errors import UnknownModel

if TYPE_CHECKING:  # naming a model (``membrane explain``) needs no model layer
    from membrane.models.base import Model, ModelRequest, ModelResponse

__all__ = [
    "PROVIDERS",
    "ModelChoice",
    "ModelRouter",
    "build_model",
    "model_view",
    "resolve_spec",
]

PROVIDERS = ("scripted", "openai", "anthropic")
Provider = Literal["scripted", "openai", "anthropic"]


@frozen
class ModelChoice:
    """What a spec resolves to. ``via`` says how: ``spec``, ``entry:NAME`` or ``alias:NAME``."""

    spec: str
    provider: Provider
    model: str
    via: str
    entry: ModelEntry

    def __init__(
        self,
        spec: str,
        provider: Provider,
        model: str,
        via: str,
        entry: ModelEntry,
    ) -> None:
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "provider", provider)
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "via", via)
        object.__setattr__(self, "entry", entry)

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
            f"model spec {spec!r} is empty", spec=str(spec), known=_known(models, aliases)
        )
    folded = {alias.casefold(): alias for alias in aliases}
    if text in aliases or text.casefold() in folded:
        target = aliases[text if text in aliases else folded[text.casefold()]].strip()
        if target in aliases:
            raise UnknownModel(
                f"model alias {text!r} points at another alias ({target!r}); an alias must "
                "name a provider:model spec or a [models] entry",
                spec=text,
                known=_known(models, aliases),
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
    known = _known(models, aliases)
    if sep and provider not in PROVIDERS:
        why = f"unknown provider {provider!r} (the providers are {', '.join(PROVIDERS)})"
    else:
        why = "not a provider:MODEL spec, a [model_aliases] alias or a [models] entry"
    listed = f"; known names: {', '.join(known)}" if known else ""
    raise UnknownModel(f"model {text!r}: {why}{listed}", spec=text, known=known)


def _known(models: Mapping[str, ModelEntry], aliases: Mapping[str, str]) -> list[str]:
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


def build_model(choice: ModelChoice) -> Model:
    """The ``Model`` for ``choice``; the SDK is imported here, and a missing key refused."""
    entry = choice.entry
    if entry.provider == "scripted":
        from membrane.models.scripted import ScriptedModel

        return ScriptedModel(Path(entry.model), name=f"scripted:{entry.model}")
    options: dict[str, object] = {"base_url": entry.base_url, "stream": entry.stream}
    if entry.api_key_env:
        options["api_key_env"] = entry.api_key_env
    for key in ("timeout", "max_tokens", "reasoning"):
        if getattr(entry, key) is not None:
            options[key] = getattr(entry, key)
    name = f"{entry.provider}:{entry.model}"
    if entry.provider == "openai":
        from membrane.models.openai import OpenAIModel

        return OpenAIModel(entry.model, name=name, **options)  # type: ignore[arg-type]
    from membrane.models.anthropic import AnthropicModel

    return AnthropicModel(entry.model, name=name, **options)  # type: ignore[arg-type]


class ModelRouter:
    """A ``Model`` that answers each request with the model its spec names.

    ``default`` (a spec or a ``Model``) answers requests whose ``model`` is ``None``. Specs are
    read through ``models`` and ``aliases`` (``from_settings`` takes both from the settings).
    """

    def __init__(
        self,
        default: Model | str | None,
        *,
        models: Mapping[str, ModelEntry] | None = None,
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        self._models = dict(models or {})
        self._aliases = dict(aliases or {})
        self._built: dict[str, Model] = {}
        self._default: Model | None = None
        self.default_choice: ModelChoice | None = None
        if isinstance(default, str):
            self.default_choice = self.resolve(default)
            self._default = self.bind(default)
        else:
            self._default = default
        self.name = getattr(self._default, "name", "router")

    @classmethod
    def from_settings(cls, settings: Settings, default: Model | str | None = None) -> ModelRouter:
        """A router on ``settings``' entries and aliases; ``default`` falls back to
        ``settings.default_model``."""
        chosen = default if default is not None else settings.default_model
        return cls(chosen, models=settings.models, aliases=settings.model_aliases)

    def resolve(self, spec: str) -> ModelChoice:
        return resolve_spec(spec, models=self._models, aliases=self._aliases)

    def bind(self, spec: str | None) -> Model:
        """The model that answers requests naming ``spec`` (``None``: the default)."""
        if spec is None:
            if self._default is None:
                raise UnknownModel(
                    "no model: pass --model, set default_model in the settings, or name one "
                    "in the definition (see docs/models.md)",
                    spec=None,
                    known=_known(self._models, self._aliases),
                )
            return self._default
        key = spec.strip()
        model = self._built.get(key)
        if model is None:
            model = self._built[key] = build_model(self.resolve(key))
        return model

    async def request(self, request: ModelRequest) -> ModelResponse:
        return await self.bind(request.model).request(request)

    async def aclose(self) -> None:
        """Close every adapter's connections."""
        for model in (*self._built.values(), self._default):
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()
