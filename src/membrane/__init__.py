"""Membrane: delegate work from one agent to another under an exact, explainable boundary.

Everything public is re-exported here; ``__all__`` is sorted and complete, and every Membrane
type that a public signature takes or returns is in it. Two modules are public as a whole:
``membrane.errors`` (every error class, each with its stable ``code``) and ``membrane.testing``
(the test doubles).
"""

from __future__ import annotations

from membrane._version import __version__
from membrane.agents import (
    Catalog,
    Dispatch,
    parse_definition,
    update_definition_text,
    write_definition,
)
from membrane.agents.definition import UNSET, AgentDefinition, DefinitionWarning, Unset
from membrane.agents.skills import Skill, SkillCatalog
from membrane.agents.translation import Dialect
from membrane.builtin_tools import ToolSink, register_builtin_tools
from membrane.config import (
    McpServerSpec,
    RateLimit,
    RoleSpec,
    Settings,
    load_settings,
    membrane_home,
)
from membrane.durable.messages import Delivery
from membrane.errors import MembraneError
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
    function_tool,
    load_extension,
)
from membrane.json_types import JSONDict, JSONObject, JSONValue
from membrane.models import Message, Model, ModelRequest, ModelResponse, ToolCall, Usage
from membrane.resolve import (
    CallParams,
    Checkout,
    DefinitionRestriction,
    Deployment,
    EffectiveAuthority,
    ParentContext,
    PromptSection,
    Sourced,
    ToolAdmission,
    TranscriptEntry,
    resolve,
)
from membrane.runtime import (
    ChildComposition,
    ChildOutcome,
    ChildSpec,
    CommandProvider,
    DelegationConfig,
    EventStream,
    InProcessProvider,
    LifecycleEvent,
    Provider,
    ProviderChild,
    RunInfo,
    RunResult,
    SubagentCapabilities,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.runtime.start import CatalogLike, DispatchLike
from membrane.runtime.worktree import Worktree, WorktreeManager, WorktreeOutcome
from membrane.sandbox.runner import SandboxPolicy
from membrane.store import (
    DeadLetter,
    Lease,
    LineageEdge,
    OutboxItem,
    Receipt,
    SessionHeader,
    SQLiteStore,
    Store,
    StoredEvent,
    WorkflowRecord,
)
from membrane.store.migrations import Migration
from membrane.tools.registry import ExtensionTools, RegistryChange, ToolRegistry
from membrane.tools.restriction import Restriction, ToolPredicate
from membrane.tools.scope import Scope
from membrane.tools.spec import Attachment, Tool, ToolContext, ToolOutput
from membrane.tools.view import ToolView
from membrane.workspace import Workspace

__all__ = [
    "UNSET",
    "AgentDefinition",
    "Attachment",
    "BeforeAgentStart",
    "BeforeToolCall",
    "CallBlock",
    "CallLike",
    "CallParams",
    "Catalog",
    "CatalogLike",
    "Checkout",
    "ChildComposition",
    "ChildOutcome",
    "ChildSpec",
    "CommandProvider",
    "DeadLetter",
    "DefinitionRestriction",
    "DefinitionWarning",
    "DelegationConfig",
    "Delivery",
    "Deployment",
    "Dialect",
    "Dispatch",
    "DispatchLike",
    "EffectiveAuthority",
    "EventStream",
    "ExtensionAPI",
    "ExtensionHooks",
    "ExtensionSource",
    "ExtensionTools",
    "InProcessProvider",
    "JSONDict",
    "JSONObject",
    "JSONValue",
    "Lease",
    "LifecycleEvent",
    "LineageEdge",
    "LoadedExtension",
    "McpServerSpec",
    "MembraneError",
    "Message",
    "MessageLike",
    "Migration",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OutboxItem",
    "ParentContext",
    "PromptSection",
    "Provider",
    "ProviderChild",
    "RateLimit",
    "Receipt",
    "RegistryChange",
    "Restriction",
    "RoleSpec",
    "RunInfo",
    "RunResult",
    "SQLiteStore",
    "SandboxPolicy",
    "Scope",
    "SessionHeader",
    "SessionShutdown",
    "SessionStart",
    "Settings",
    "Skill",
    "SkillCatalog",
    "Sourced",
    "Store",
    "StoredEvent",
    "SubagentCapabilities",
    "SubagentRuntime",
    "SubagentStartRequest",
    "Tool",
    "ToolAdmission",
    "ToolCall",
    "ToolContext",
    "ToolOutput",
    "ToolPredicate",
    "ToolRegistry",
    "ToolSink",
    "ToolView",
    "TranscriptEntry",
    "TurnEnd",
    "Unset",
    "Usage",
    "WorkflowRecord",
    "Workspace",
    "Worktree",
    "WorktreeManager",
    "WorktreeOutcome",
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
