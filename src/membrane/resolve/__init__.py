"""Effective authority: what a child really gets, resolved before any model runs.

``resolve(definition, call, parent, deployment)`` is pure. Its result carries each spawn-time
field with its source, the prompt, the extensions, the checkout, every tool that is callable or
left out (with one reason) and the live restriction the runtime installs on the child's scope.
"""

from __future__ import annotations

import typing

from membrane._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
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

# Nothing is imported until a name is first used, so importing the package (and the CLI's
# start) pays only for what is touched.
__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "ExtensionSelection": "membrane.extensions.select",
        "extension_of": "membrane.extensions.select",
        "Deployment": "membrane.resolve.authority",
        "EffectiveAuthority": "membrane.resolve.authority",
        "ParentContext": "membrane.resolve.authority",
        "ToolAdmission": "membrane.resolve.authority",
        "resolve": "membrane.resolve.authority",
        "INVOCATION_FIELDS": "membrane.resolve.invocation",
        "RUN_ID_PLACEHOLDER": "membrane.resolve.invocation",
        "CallParams": "membrane.resolve.invocation",
        "Checkout": "membrane.resolve.invocation",
        "Source": "membrane.resolve.invocation",
        "Sourced": "membrane.resolve.invocation",
        "worktrees_folder": "membrane.resolve.invocation",
        "PromptSection": "membrane.resolve.prompt",
        "TranscriptEntry": "membrane.resolve.prompt",
        "render_parent_context": "membrane.resolve.prompt",
        "LEFT_OUT_REASONS": "membrane.resolve.tools",
        "DefinitionRestriction": "membrane.resolve.tools",
        "Selector": "membrane.resolve.tools",
        "ToolPlan": "membrane.resolve.tools",
        "builtin_of": "membrane.resolve.tools",
        "describe_tools": "membrane.resolve.tools",
    },
    globals(),
)
