"""Public test doubles: models and a store that need no network, no keys and no files.

* ``ScriptedModel``: replays a YAML script per agent (format in ``membrane.models.scripted``).
* ``FunctionModel``: wraps ``async def fn(request) -> ModelResponse`` for a dynamic model.
* ``RequestLog``: what ``requests`` of both models is: the requests received, in order.
* ``MemoryStore``: the ``Store`` protocol in memory, with ``SQLiteStore``'s semantics.
* ``stored_receipt``, ``stored_lease``: what a store holds for a request id or a run, read
  the way no runtime needs to.
"""

from __future__ import annotations

from membrane.models.function import FunctionModel
from membrane.models.request_log import RequestLog
from membrane.models.scripted import ScriptedModel
from membrane.store.inspection import stored_lease, stored_receipt
from membrane.store.memory import MemoryStore

__all__ = [
    "FunctionModel",
    "MemoryStore",
    "RequestLog",
    "ScriptedModel",
    "stored_lease",
    "stored_receipt",
]
