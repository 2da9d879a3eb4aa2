"""Membrane: delegate work from one agent to another under an exact, explainable boundary.

This top level is what a host needs to delegate work: open a project (``Workspace``,
``SubagentRuntime.open``), start, wait for and steer children (``SubagentRuntime``,
``SubagentStartRequest``, ``RunInfo``, ``RunResult``), give them tools (``ToolRegistry``,
``Tool``) and models (``Model``), and see what a child would get before it runs
(``resolve``, ``EffectiveAuthority``). The rest lives in named tiers:

* ``membrane.extensions``: for extension authors (``ExtensionAPI``, hooks and their events);
* ``membrane.lowlevel``: for provider, store and catalog implementers;
* ``membrane.testing``: test doubles (``ScriptedModel``, ``FunctionModel``, ``MemoryStore``);
* ``membrane.errors``: every error class, each with its stable ``code``.

``__all__`` is sorted and complete in each tier, and every Membrane type that a public
signature takes or returns is exported by one of them.
"""

from __future__ import annotations

from membrane._version import __version__
from membrane.agents import Catalog, parse_definition
from membrane.agents.definition import UNSET, AgentDefinition
from membrane.builtin_tools import register_builtin_tools
from membrane.config import Settings, load_settings
from membrane.durable.runs import RunInfo, RunResult
from membrane.errors import MembraneError
from membrane.json_types import JSONObject, JSONValue
from membrane.models import Message, Model, ModelRequest, ModelResponse, ToolCall, Usage
from membrane.resolve import CallParams, Deployment, EffectiveAuthority, ParentContext, resolve
from membrane.runtime import (
    CommandProvider,
    DelegationConfig,
    EventStream,
    InProcessProvider,
    LifecycleEvent,
    RuntimeOptions,
    SubagentCapabilities,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.runtime.workspace import Workspace
from membrane.store import SQLiteStore
from membrane.tools.registry import ToolRegistry
from membrane.tools.restriction import Restriction
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext
from membrane.tools.view import ToolView

__all__ = [
    "UNSET",
    "AgentDefinition",
    "CallParams",
    "Catalog",
    "CommandProvider",
    "DelegationConfig",
    "Deployment",
    "EffectiveAuthority",
    "EventStream",
    "InProcessProvider",
    "JSONObject",
    "JSONValue",
    "LifecycleEvent",
    "MembraneError",
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ParentContext",
    "Restriction",
    "RunInfo",
    "RunResult",
    "RuntimeOptions",
    "SQLiteStore",
    "Scope",
    "Settings",
    "SubagentCapabilities",
    "SubagentRuntime",
    "SubagentStartRequest",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolRegistry",
    "ToolView",
    "Usage",
    "Workspace",
    "__version__",
    "load_settings",
    "parse_definition",
    "register_builtin_tools",
    "resolve",
]
