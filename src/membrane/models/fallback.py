"""``FallbackModel``: models tried in order, the next one only when the one before failed in a
way another model can fix.

A definition's ``model: [primary, fallback...]`` and a settings alias written as a list
(``fast = ["local", "openai:gpt-4.1-mini"]``) become one. The errors a fallback can fix are
``model-unavailable`` (the provider stayed down or overloaded after its retries),
``model-rate-limited`` (it kept answering 429 after its retries) and
``model-context-exceeded`` (the conversation is too long for this model's window). Any other
failure (a refused key, a request the server rejects, a timeout) is the same for every model
and ends the turn at once. Each request starts again at the first model: a provider that was
down a turn ago may be back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from membrane.errors import (
    ModelContextExceeded,
    ModelError,
    ModelRateLimited,
    ModelUnavailable,
)
from membrane.models.base import Model, ModelRequest, ModelResponse

__all__ = ["FALLBACK_ERRORS", "FallbackModel"]

#: The failures the next model of a chain is tried on.
FALLBACK_ERRORS: Final = (ModelUnavailable, ModelRateLimited, ModelContextExceeded)


class FallbackModel:
    """A ``Model`` answering with the first of ``models`` that does not fail with one of
    ``FALLBACK_ERRORS``; its response names the model that answered (``answered_by``) and the
    attempts that failed before (``failed_attempts``). When every model fails, the last error
    is raised, carrying ``attempts`` (each failed model, its code and message)."""

    def __init__(self, models: Sequence[Model]) -> None:
        if not models:
            raise ValueError("a FallbackModel needs at least one model")
        self.models = tuple(models)
        self.name = self.models[0].name

    async def request(self, request: ModelRequest) -> ModelResponse:
        failed: list[dict[str, str]] = []
        for model in self.models[:-1]:
            try:
                response = await model.request(request)
            except FALLBACK_ERRORS as exc:
                failed.append(_attempt(model, exc))
                continue
            return replace(response, answered_by=model.name, failed_attempts=tuple(failed))
        last = self.models[-1]
        try:
            response = await last.request(request)
        except FALLBACK_ERRORS as exc:
            if not failed:
                raise
            failed.append(_attempt(last, exc))
            raise _exhausted(exc, failed) from exc
        return replace(response, answered_by=last.name, failed_attempts=tuple(failed))

    async def aclose(self) -> None:
        """Nothing of its own: the router that built it closes its models."""


def _exhausted(last: ModelError, failed: list[dict[str, str]]) -> ModelError:
    """The last model's error, saying the models before it failed too."""
    before = "; ".join(f"{a['model']}: {a['code']}" for a in failed[:-1])
    message = f"{last.message} (every model of the chain failed; before it: {before})"
    return type(last)(message, **{**last.data, "attempts": failed})


def _attempt(model: Model, error: ModelError) -> dict[str, str]:
    return {"model": model.name, "code": error.code, "message": error.message}
