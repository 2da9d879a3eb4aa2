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

import sys
import types

from membrane._lazy import lazy_exports as _lazy_exports
from membrane._version import __version__

# Not ``typing.TYPE_CHECKING``: ``membrane --version`` does not import ``typing``.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from membrane.agents import Catalog, parse_definition
    from membrane.agents.definition import UNSET, AgentDefinition
    from membrane.builtin_tools import register_builtin_tools
    from membrane.config import Budget, Settings, load_settings
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
    "Budget",
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

# Nothing is imported until a name is first used, so importing the package (and the CLI's
# start) pays only for what is touched.
__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "Catalog": "membrane.agents",
        "parse_definition": "membrane.agents",
        "UNSET": "membrane.agents.definition",
        "AgentDefinition": "membrane.agents.definition",
        "register_builtin_tools": "membrane.builtin_tools",
        "Budget": "membrane.config",
        "Settings": "membrane.config",
        "load_settings": "membrane.config",
        "RunInfo": "membrane.durable.runs",
        "RunResult": "membrane.durable.runs",
        "MembraneError": "membrane.errors",
        "JSONObject": "membrane.json_types",
        "JSONValue": "membrane.json_types",
        "Message": "membrane.models",
        "Model": "membrane.models",
        "ModelRequest": "membrane.models",
        "ModelResponse": "membrane.models",
        "ToolCall": "membrane.models",
        "Usage": "membrane.models",
        "CallParams": "membrane.resolve",
        "Deployment": "membrane.resolve",
        "EffectiveAuthority": "membrane.resolve",
        "ParentContext": "membrane.resolve",
        "resolve": "membrane.resolve",
        "CommandProvider": "membrane.runtime",
        "DelegationConfig": "membrane.runtime",
        "EventStream": "membrane.runtime",
        "InProcessProvider": "membrane.runtime",
        "LifecycleEvent": "membrane.runtime",
        "RuntimeOptions": "membrane.runtime",
        "SubagentCapabilities": "membrane.runtime",
        "SubagentRuntime": "membrane.runtime",
        "SubagentStartRequest": "membrane.runtime",
        "Workspace": "membrane.runtime.workspace",
        "SQLiteStore": "membrane.store",
        "ToolRegistry": "membrane.tools.registry",
        "Restriction": "membrane.tools.restriction",
        "Scope": "membrane.tools.scope",
        "Tool": "membrane.tools.spec",
        "ToolContext": "membrane.tools.spec",
        "ToolView": "membrane.tools.view",
    },
    globals(),
)


class _Package(types.ModuleType):
    """``membrane.resolve`` is both a subpackage and the function ``resolve``: the import
    system binds the subpackage on the package when it is first imported, and the function
    must win, as it does when everything is imported eagerly."""

    @property
    def resolve(self) -> object:
        from membrane.resolve import resolve

        return resolve

    @resolve.setter
    def resolve(self, value: object) -> None:
        pass  # the subpackage being bound: keep answering with the function


sys.modules[__name__].__class__ = _Package

del TYPE_CHECKING
