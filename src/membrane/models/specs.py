"""Model specs: the one way a model is named, from ``--model`` to a definition's ``model:``.

A spec is one of

* ``scripted:PATH``: a ``ScriptedModel`` replaying the YAML script at PATH;
* ``openai:MODEL``: ``OpenAIModel`` (``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` as the SDK reads);
* ``anthropic:MODEL``: ``AnthropicModel`` (``ANTHROPIC_API_KEY``);
* the name of a ``[models.NAME]`` entry in the settings;
* the name of a ``[model_aliases]`` alias, whose value is one of the forms above.

``resolve_spec`` says what a spec means (pure, no SDK import; it lives in
``membrane.models.naming`` with ``model_view``, all that ``explain`` needs, and is imported
from here too); ``build_model`` builds it; ``ModelRouter`` is the ``Model`` a deployment runs
on: it answers each request with the model its ``ModelRequest.model`` names (a definition's or
a call's spec) or, when that is ``None``, its default, building each model once. ``bind()``
builds the model for a spec at once, so an unknown name (``unknown-model``), a missing key
(``model-auth-failed``) or a missing SDK (``extra-not-installed``) is refused before any
request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from membrane.config.model_names import check_allowed, plan_pair
from membrane.config.values import ModelEntry, Settings
from membrane.errors import UnknownModel
from membrane.models.limiter import LaneLimits, ModelLimiter
from membrane.models.naming import PROVIDERS, ModelChoice, known_names, model_view, resolve_spec

if TYPE_CHECKING:  # naming a model (``membrane explain``) needs no model layer
    from membrane.models.base import Model, ModelRequest, ModelResponse
    from membrane.models.wire_log import WireLog

__all__ = [
    "PROVIDERS",
    "ModelChoice",
    "ModelRouter",
    "build_model",
    "model_view",
    "resolve_spec",
]


def build_model(choice: ModelChoice, limiter: ModelLimiter | None = None) -> Model:
    """The ``Model`` for ``choice``; the SDK is imported here, and a missing key refused.
    ``limiter``: the deployment's, whose lane for the entry's endpoint the model draws on."""
    entry = choice.entry
    if entry.provider == "scripted":
        from membrane.models.scripted import ScriptedModel

        return ScriptedModel(Path(entry.model), name=f"scripted:{entry.model}")
    options: dict[str, object] = {"base_url": entry.base_url, "stream": entry.stream}
    if entry.api_key_env:
        options["api_key_env"] = entry.api_key_env
    for key in ("timeout", "max_tokens", "reasoning", "max_response_bytes", "stall_timeout"):
        if getattr(entry, key) is not None:
            options[key] = getattr(entry, key)
    name = f"{entry.provider}:{entry.model}"
    if choice.via != "spec":
        options["entry"] = choice.via  # named in its errors: where to look in the settings
    limits = LaneLimits(
        entry.requests_per_minute, entry.tokens_per_minute, entry.max_concurrent_requests
    )
    if limiter is not None and limits:
        options["lane"] = limiter.lane(f"{entry.provider}:{entry.model}@{entry.base_url}", limits)
    if entry.provider == "openai":
        from membrane.models.openai import OpenAIModel

        if entry.strict_tools:
            options["strict_tools"] = True
        return OpenAIModel(entry.model, name=name, **options)  # type: ignore[arg-type]
    from membrane.models.anthropic import AnthropicModel

    return AnthropicModel(entry.model, name=name, **options)  # type: ignore[arg-type]


class ModelRouter:
    """A ``Model`` that answers each request with the model its spec names.

    ``default`` (a spec or a ``Model``) answers requests whose ``model`` is ``None``. Specs are
    read through ``models`` and ``aliases`` (``from_settings`` takes both from the settings).
    ``request_log``, when given, is handed to every SDK adapter the router builds: each of its
    requests is logged there (``membrane.models.wire_log``).
    """

    def __init__(
        self,
        default: Model | str | None,
        *,
        models: Mapping[str, ModelEntry] | None = None,
        aliases: Mapping[str, str] | None = None,
        alias_fallbacks: Mapping[str, tuple[str, ...]] | None = None,
        allowed: Sequence[str] | None = None,
        request_log: WireLog | None = None,
    ) -> None:
        self.request_log = request_log
        #: One per deployment: every model this router builds for one endpoint shares its lane.
        self.limiter = ModelLimiter()
        self._models = dict(models or {})
        self._aliases = dict(aliases or {})
        self._alias_fallbacks = dict(alias_fallbacks or {})
        self._allowed = None if allowed is None else tuple(allowed)
        self._built: dict[str, Model] = {}
        self._default: Model | None = None
        self.default_choice: ModelChoice | None = None
        #: A default that chooses by the permission mode (``opusplan``): (planning, otherwise).
        self._plan_default: tuple[str, str] | None = None
        if isinstance(default, str):
            own = default.strip() in self._models or default.strip() in self._aliases
            self._plan_default = None if own else plan_pair(default)  # an entry of it wins
            if self._plan_default is not None:
                default = self._plan_default[1]  # the model when not planning
            self.default_choice = self.resolve(default)
            self._default = self.bind(default)
        else:
            self._default = default
        self.name = getattr(self._default, "name", "router")

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        default: Model | str | None = None,
        *,
        request_log: WireLog | None = None,
    ) -> ModelRouter:
        """A router on ``settings``' entries and aliases; ``default`` falls back to
        ``settings.default_model``."""
        chosen = default if default is not None else settings.default_model
        return cls(
            chosen,
            models=settings.models,
            aliases=settings.model_aliases,
            alias_fallbacks=settings.alias_fallbacks,
            allowed=settings.allowed_models,
            request_log=request_log,
        )

    def resolve(self, spec: str) -> ModelChoice:
        return resolve_spec(spec, models=self._models, aliases=self._aliases)

    def bind(
        self, spec: str | None, *, fallbacks: Sequence[str] = (), planning: bool = False
    ) -> Model:
        """The model that answers requests naming ``spec`` (``None``: the default), followed by
        ``fallbacks`` (and, for an alias written as a list, the alias's own) in a
        ``FallbackModel``. Every model of the chain is built now, and each must be in the
        settings' ``allowed_models`` (``model-not-allowed``). A default that chooses by the
        permission mode (``opusplan``) means its planning model for a ``planning`` child and
        its other model otherwise, as the same name in a file does."""
        if spec is None and self._plan_default is not None:
            spec = self._plan_default[0 if planning else 1]
        if spec is not None:
            folded = {alias.casefold(): alias for alias in self._alias_fallbacks}
            alias = spec.strip() if spec.strip() in self._alias_fallbacks else None
            alias = alias or folded.get(spec.strip().casefold())
            if alias is not None:
                fallbacks = (*fallbacks, *self._alias_fallbacks[alias])
        if not fallbacks:
            return self._bind_one(spec)
        from membrane.models.fallback import FallbackModel

        return FallbackModel([self._bind_one(spec), *(self._bind_one(f) for f in fallbacks)])

    def _bind_one(self, spec: str | None) -> Model:
        if spec is not None:
            check_allowed(spec, self._allowed, models=self._models, aliases=self._aliases)
        if spec is None:
            if self._default is None:
                raise UnknownModel(
                    "no model: pass --model, set default_model in the settings, or name one "
                    "in the definition (see docs/models.md)",
                    spec=None,
                    known=known_names(self._models, self._aliases),
                )
            return self._default
        key = spec.strip()
        model = self._built.get(key)
        if model is None:
            model = self._built[key] = build_model(self.resolve(key), self.limiter)
            if self.request_log is not None and hasattr(model, "request_log"):
                model.request_log = self.request_log
        return model

    async def request(self, request: ModelRequest) -> ModelResponse:
        return await self.bind(request.model).request(request)

    async def aclose(self) -> None:
        """Close every adapter's connections."""
        for model in (*self._built.values(), self._default):
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()
