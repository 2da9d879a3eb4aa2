"""Tools: the spec, the live registry, restrictions, scopes and the one resolver (``ToolView``)."""

from __future__ import annotations

import typing

from membrane._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
    from membrane.tools.codemode import render_sdk
    from membrane.tools.registry import ExtensionTools, RegistryChange, ToolRegistry
    from membrane.tools.restriction import Restriction, ToolPredicate
    from membrane.tools.scope import Scope
    from membrane.tools.sdk import load_sdk
    from membrane.tools.spec import (
        Attachment,
        Tool,
        ToolContext,
        ToolHandler,
        ToolLoader,
        ToolOutput,
    )
    from membrane.tools.view import ToolView

__all__ = [
    "Attachment",
    "ExtensionTools",
    "RegistryChange",
    "Restriction",
    "Scope",
    "Tool",
    "ToolContext",
    "ToolHandler",
    "ToolLoader",
    "ToolOutput",
    "ToolPredicate",
    "ToolRegistry",
    "ToolView",
    "load_sdk",
    "render_sdk",
]

# Nothing is imported until a name is first used, so importing the package (and the CLI's
# start) pays only for what is touched.
__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "render_sdk": "membrane.tools.codemode",
        "ExtensionTools": "membrane.tools.registry",
        "RegistryChange": "membrane.tools.registry",
        "ToolRegistry": "membrane.tools.registry",
        "Restriction": "membrane.tools.restriction",
        "ToolPredicate": "membrane.tools.restriction",
        "Scope": "membrane.tools.scope",
        "load_sdk": "membrane.tools.sdk",
        "Attachment": "membrane.tools.spec",
        "Tool": "membrane.tools.spec",
        "ToolContext": "membrane.tools.spec",
        "ToolHandler": "membrane.tools.spec",
        "ToolLoader": "membrane.tools.spec",
        "ToolOutput": "membrane.tools.spec",
        "ToolView": "membrane.tools.view",
    },
    globals(),
)
