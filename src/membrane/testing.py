"""Public test doubles: models and a store that need no network, no keys and no files.

* ``ScriptedModel``: replays a YAML script per agent (format in ``membrane.models.scripted``).
* ``FunctionModel``: wraps ``async def fn(request) -> ModelResponse`` for a dynamic model.
* ``MemoryStore``: the ``Store`` protocol in memory, with ``SQLiteStore``'s semantics.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from membrane.models.base import Model, ModelRequest, ModelResponse
from membrane.models.scripted import ScriptedModel
from membrane.store.memory import MemoryStore

__all__ = ["FunctionModel", "MemoryStore", "ScriptedModel"]


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
