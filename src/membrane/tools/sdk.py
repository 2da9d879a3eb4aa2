"""Loading the Code Mode SDK of a scope: the rendered module, bound to the scope's live view.

``membrane.tools.codemode`` writes the source; ``load_sdk`` executes it as a fresh module whose
every function resolves the scope's view again at each call.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from membrane.errors import ToolSpecError
from membrane.tools.scope import Scope
from membrane.tools.spec import ToolContext
from membrane.tools.view import ToolView

__all__ = ["load_sdk"]


def load_sdk(source: Scope | Callable[[], ToolView], context: ToolContext) -> types.ModuleType:
    """The Code Mode SDK of ``source`` as a fresh module, bound to its live view.

    ``source`` is a ``Scope`` or a callable returning the view to use now. The module's
    functions are those of the view at load time, but every call resolves the view again and
    runs through its ``ToolView.call``: a tool removed, denied or hidden after loading fails
    with ``tool-not-visible`` instead of running. A bare ``ToolView`` is refused, because a
    frozen view would keep running tools the scope no longer shows; for a fixed set of tools
    that should never change, pass ``lambda: view`` deliberately.
    """
    current = _view_source(source)
    module = types.ModuleType("membrane_tools")
    exec(compile(current().code_sdk(), "<membrane tools>", "exec"), module.__dict__)

    async def call(name: str, arguments: dict[str, Any]) -> Any:
        return await current().call(name, arguments, context)

    module.bind(call)
    return module


def _view_source(source: Scope | Callable[[], ToolView]) -> Callable[[], ToolView]:
    if isinstance(source, Scope):
        return source.view
    if isinstance(source, ToolView) or not callable(source):
        raise ToolSpecError(
            f"load_sdk needs a Scope (or a callable returning its current ToolView), got "
            f"{type(source).__name__}; a fixed ToolView would keep calling tools the scope no "
            "longer shows",
            got=type(source).__name__,
        )
    return source
