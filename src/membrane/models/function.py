"""``FunctionModel``: a ``Model`` whose every turn is a function of the request (a test double)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from membrane.models.base import Model, ModelRequest, ModelResponse

__all__ = ["FunctionModel"]


class FunctionModel(Model):
    """A ``Model`` whose every turn is ``await fn(request)``.

    ``requests`` records every request received, in order, before ``fn`` runs, so a test can
    inspect what the loop sent even when ``fn`` raises.
    """

    def __init__(
        self,
        fn: Callable[[ModelRequest], Awaitable[ModelResponse]],
        *,
        name: str = "function",
    ) -> None:
        self.name = name
        self.requests: list[ModelRequest] = []
        self._fn = fn

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return await self._fn(request)
