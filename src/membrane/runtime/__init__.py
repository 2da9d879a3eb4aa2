"""The subagent runtime: start requests, honest providers, unpublished setup, durable depth."""

from __future__ import annotations

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
