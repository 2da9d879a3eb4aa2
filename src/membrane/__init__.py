"""Membrane: delegate work from one agent to another under an exact, explainable boundary.

Everything public is re-exported here; ``__all__`` is sorted and complete.
"""

from __future__ import annotations

from membrane.agents import (
    Catalog,
    Dispatch,
    load_settings,
    membrane_home,
    parse_definition,
    update_definition_text,
    write_definition,
)
from membrane.agents.definition import UNSET, AgentDefinition, DefinitionWarning
from membrane.builtin_tools import register_builtin_tools
from membrane.errors import MembraneError
from membrane.models import Message, Model, ModelRequest, ModelResponse, ToolCall, Usage
from membrane.resolve import (
    CallParams,
    Checkout,
    Deployment,
    EffectiveAuthority,
    ParentContext,
    Sourced,
    resolve,
)
from membrane.runtime import (
    CommandProvider,
    InProcessProvider,
    Provider,
    SubagentCapabilities,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.settings import Settings
from membrane.store import SQLiteStore, Store
from membrane.tools.extensions import (
    ExtensionAPI,
    ExtensionSource,
    LoadedExtension,
    discover_extensions,
    function_tool,
    load_extension,
)
from membrane.tools.registry import ExtensionTools, RegistryChange, ToolRegistry
from membrane.tools.restriction import Restriction, ToolPredicate
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext
from membrane.tools.view import ToolView

__version__ = "0.1.0"

__all__ = [
    "UNSET",
    "AgentDefinition",
    "CallParams",
    "Catalog",
    "Checkout",
    "CommandProvider",
    "DefinitionWarning",
    "Deployment",
    "Dispatch",
    "EffectiveAuthority",
    "ExtensionAPI",
    "ExtensionSource",
    "ExtensionTools",
    "InProcessProvider",
    "LoadedExtension",
    "MembraneError",
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ParentContext",
    "Provider",
    "RegistryChange",
    "Restriction",
    "SQLiteStore",
    "Scope",
    "Settings",
    "Sourced",
    "Store",
    "SubagentCapabilities",
    "SubagentRuntime",
    "SubagentStartRequest",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolPredicate",
    "ToolRegistry",
    "ToolView",
    "Usage",
    "__version__",
    "discover_extensions",
    "function_tool",
    "load_extension",
    "load_settings",
    "membrane_home",
    "parse_definition",
    "register_builtin_tools",
    "resolve",
    "update_definition_text",
    "write_definition",
]
