"""Tools: the spec, the live registry, restrictions, scopes and the one resolver (``ToolView``)."""

from membrane.tools.codemode import render_sdk
from membrane.tools.registry import ExtensionTools, RegistryChange, ToolRegistry
from membrane.tools.restriction import Restriction, ToolPredicate
from membrane.tools.scope import Scope
from membrane.tools.sdk import load_sdk
from membrane.tools.spec import Attachment, Tool, ToolContext, ToolHandler, ToolLoader, ToolOutput
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
