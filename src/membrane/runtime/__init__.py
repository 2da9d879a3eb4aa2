"""The subagent runtime: start requests, honest providers, unpublished setup, durable depth."""

from __future__ import annotations

import typing

from membrane._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
    from membrane.durable.outbox import OutboxDrainer
    from membrane.durable.runs import RunInfo, RunResult
    from membrane.runtime.delegation import DelegationConfig
    from membrane.runtime.events import EventStream, LifecycleEvent
    from membrane.runtime.options import RuntimeOptions
    from membrane.runtime.provider import (
        ChildComposition,
        ChildOutcome,
        ChildSpec,
        Provider,
        ProviderChild,
        SubagentCapabilities,
    )
    from membrane.runtime.providers import CommandProvider, InProcessProvider
    from membrane.runtime.request import SubagentStartRequest
    from membrane.runtime.runtime import SubagentRuntime

__all__ = [
    "ChildComposition",
    "ChildOutcome",
    "ChildSpec",
    "CommandProvider",
    "DelegationConfig",
    "EventStream",
    "InProcessProvider",
    "LifecycleEvent",
    "OutboxDrainer",
    "Provider",
    "ProviderChild",
    "RunInfo",
    "RunResult",
    "RuntimeOptions",
    "SubagentCapabilities",
    "SubagentRuntime",
    "SubagentStartRequest",
]

# Nothing is imported until a name is first used, so importing the package (and the CLI's
# start) pays only for what is touched.
__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "OutboxDrainer": "membrane.durable.outbox",
        "RunInfo": "membrane.durable.runs",
        "RunResult": "membrane.durable.runs",
        "DelegationConfig": "membrane.runtime.delegation",
        "EventStream": "membrane.runtime.events",
        "LifecycleEvent": "membrane.runtime.events",
        "RuntimeOptions": "membrane.runtime.options",
        "ChildComposition": "membrane.runtime.provider",
        "ChildOutcome": "membrane.runtime.provider",
        "ChildSpec": "membrane.runtime.provider",
        "Provider": "membrane.runtime.provider",
        "ProviderChild": "membrane.runtime.provider",
        "SubagentCapabilities": "membrane.runtime.provider",
        "CommandProvider": "membrane.runtime.providers",
        "InProcessProvider": "membrane.runtime.providers",
        "SubagentStartRequest": "membrane.runtime.request",
        "SubagentRuntime": "membrane.runtime.runtime",
    },
    globals(),
)
