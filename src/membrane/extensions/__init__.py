"""Extensions: discovery and loading (project files and entry points), selection for a child, and
the lifecycle hooks bound to the extensions a child loaded."""

from membrane.extensions.hooks import ExtensionHooks
from membrane.extensions.load import (
    ExtensionAPI,
    ExtensionSource,
    LoadedExtension,
    discover_extensions,
    function_tool,
    load_extension,
)
from membrane.extensions.select import ExtensionSelection, extension_of, select_extensions

__all__ = [
    "ExtensionAPI",
    "ExtensionHooks",
    "ExtensionSelection",
    "ExtensionSource",
    "LoadedExtension",
    "discover_extensions",
    "extension_of",
    "function_tool",
    "load_extension",
    "select_extensions",
]
