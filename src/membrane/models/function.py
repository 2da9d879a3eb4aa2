"""``FunctionModel``: a ``Model`` whose every turn is a function of the request (a test double)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from membrane.models.base import Model, ModelRequest, ModelResponse
from membrane.models.request_log import RequestLog

__all__ = ["FunctionModel"]


class FunctionModel(Model):
    """A ``Model`` whose every turn is ``await fn(request)``.

    ``requests`` records every request received, in order, before ``fn`` runs, so a test can
    inspect what the loop sent even when ``fn`` raises (a ``RequestLog``: a run's turns share
    their conversation, so a long run keeps its messages once, not once per turn).
    """

    def __init__(
        self,
        fn: Callable[[ModelRequest], Awaitable[ModelResponse]],
        *,
        name: str = "function",
    ) -> None:
        self.name = name
        self.requests = RequestLog()
        self._fn = fn

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return await self._fn(request)
