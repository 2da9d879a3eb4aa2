"""Public test doubles: models and a store that need no network, no keys and no files.

* ``ScriptedModel``: replays a YAML script per agent (format in ``membrane.models.scripted``).
* ``FunctionModel``: wraps ``async def fn(request) -> ModelResponse`` for a dynamic model.
* ``RequestLog``: what ``requests`` of both models is: the requests received, in order.
* ``MemoryStore``: the ``Store`` protocol in memory, with ``SQLiteStore``'s semantics.
"""

from __future__ import annotations

from membrane.models.function import FunctionModel
from membrane.models.request_log import RequestLog
from membrane.models.scripted import ScriptedModel
from membrane.store.memory import MemoryStore

__all__ = ["FunctionModel", "MemoryStore", "RequestLog", "ScriptedModel"]
