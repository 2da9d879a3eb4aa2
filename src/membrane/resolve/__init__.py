"""Effective authority: what a child really gets, resolved before any model runs.

``resolve(definition, call, parent, deployment)`` is pure. Its result carries each spawn-time
field with its source, the prompt, the extensions, the checkout, every tool that is callable or
left out (with one reason) and the live restriction the runtime installs on the child's scope.
"""

from __future__ import annotations

from membrane.extensions.select import ExtensionSelection, extension_of
from membrane.resolve.authority import (
    Deployment,
    EffectiveAuthority,
    ParentContext,
    ToolAdmission,
    resolve,
)
from membrane.resolve.invocation import (
    INVOCATION_FIELDS,
    RUN_ID_PLACEHOLDER,
    CallParams,
    Checkout,
    Source,
    Sourced,
    worktrees_folder,
)
from membrane.resolve.prompt import PromptSection, TranscriptEntry, render_parent_context
from membrane.resolve.tools import (
    LEFT_OUT_REASONS,
    DefinitionRestriction,
    Selector,
    ToolPlan,
    builtin_of,
    describe_tools,
)

__all__ = [
    "INVOCATION_FIELDS",
    "LEFT_OUT_REASONS",
    "RUN_ID_PLACEHOLDER",
    "CallParams",
    "Checkout",
    "DefinitionRestriction",
    "Deployment",
    "EffectiveAuthority",
    "ExtensionSelection",
    "ParentContext",
    "PromptSection",
    "Selector",
    "Source",
    "Sourced",
    "ToolAdmission",
    "ToolPlan",
    "TranscriptEntry",
    "builtin_of",
    "describe_tools",
    "extension_of",
    "render_parent_context",
    "resolve",
    "worktrees_folder",
]
