"""Public test doubles: models and a store that need no network, no keys and no files.

* ``ScriptedModel``: replays a YAML script per agent (format in ``membrane.models.scripted``).
* ``FunctionModel``: wraps ``async def fn(request) -> ModelResponse`` for a dynamic model.
* ``MemoryStore``: the ``Store`` protocol in memory, with ``SQLiteStore``'s semantics.
"""

from __future__ import annotations

from membrane.models.function import FunctionModel
from membrane.models.scripted import ScriptedModel
from membrane.store.memory import MemoryStore

__all__ = ["FunctionModel", "MemoryStore", "ScriptedModel"]
