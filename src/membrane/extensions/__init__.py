"""The tier for extension authors, and the extensions room: discovery and loading (project files
and entry points), selection for a child, and the lifecycle hooks bound to the extensions a
child loaded.

An extension's ``setup(ext)`` receives an ``ExtensionAPI``: it registers tools
(``ext.tool``/``function_tool``, kept live in its ``ExtensionTools``), prompt sections, and hook
handlers (``ext.on(event, handler)``), which are called with the event objects below; a tool
that needs a backend declares it in ``Tool.requires`` and the extension that brings the backend
up says so with ``ext.provide(NAME)`` (``Requirements``).
"""

from __future__ import annotations

import typing

from membrane._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
    from membrane.extensions.function_tools import function_tool
    from membrane.extensions.hooks import (
        BeforeAgentStart,
        BeforeToolCall,
        CallBlock,
        CallLike,
        ExtensionHooks,
        MessageLike,
        SessionShutdown,
        SessionStart,
        TurnEnd,
    )
    from membrane.extensions.load import (
        ExtensionAPI,
        ExtensionSource,
        LoadedExtension,
        discover_extensions,
        load_extension,
    )
    from membrane.tools.registry import ExtensionTools
    from membrane.tools.requirements import Requirements

__all__ = [
    "BeforeAgentStart",
    "BeforeToolCall",
    "CallBlock",
    "CallLike",
    "ExtensionAPI",
    "ExtensionHooks",
    "ExtensionSource",
    "ExtensionTools",
    "LoadedExtension",
    "MessageLike",
    "Requirements",
    "SessionShutdown",
    "SessionStart",
    "TurnEnd",
    "discover_extensions",
    "function_tool",
    "load_extension",
]

# Nothing is imported until a name is first used, so importing the package (and the CLI's
# start) pays only for what is touched.
__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "BeforeAgentStart": "membrane.extensions.hooks",
        "BeforeToolCall": "membrane.extensions.hooks",
        "CallBlock": "membrane.extensions.hooks",
        "CallLike": "membrane.extensions.hooks",
        "ExtensionHooks": "membrane.extensions.hooks",
        "MessageLike": "membrane.extensions.hooks",
        "SessionShutdown": "membrane.extensions.hooks",
        "SessionStart": "membrane.extensions.hooks",
        "TurnEnd": "membrane.extensions.hooks",
        "ExtensionAPI": "membrane.extensions.load",
        "ExtensionSource": "membrane.extensions.load",
        "LoadedExtension": "membrane.extensions.load",
        "discover_extensions": "membrane.extensions.load",
        "function_tool": "membrane.extensions.function_tools",
        "load_extension": "membrane.extensions.load",
        "ExtensionTools": "membrane.tools.registry",
        "Requirements": "membrane.tools.requirements",
    },
    globals(),
)
