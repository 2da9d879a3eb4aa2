"""The tier for implementers: providers, stores, catalogs and the resolver's parts.

A host that delegates work needs only ``membrane``. Code that *implements* a part of Membrane
reads this tier: a provider (``Provider``, ``ProviderChild``, ``ChildSpec``, the setup callback
and what it returns, ``ChildOutcome``), a store (``Store``, the protocol of each concern it
joins, its rows, ``Migration``; ``PostgresStore`` for several nodes), a catalog
(``CatalogLike``, ``DispatchLike``), the resolver's pieces that ``EffectiveAuthority`` exposes,
worktrees, and the definition writer. Extension authors have ``membrane.extensions``; tests
have ``membrane.testing``.
"""

from __future__ import annotations

from membrane.agents import Dispatch, update_definition_text, write_definition
from membrane.agents.command_hooks import CommandHook
from membrane.agents.definition import DefinitionWarning, Unset
from membrane.agents.dialect import Dialect
from membrane.agents.skills import Skill, SkillCatalog
from membrane.builtin_tools import ToolSink
from membrane.config import (
    McpServerSpec,
    ModelEntry,
    ModelPrice,
    ProductRule,
    RateLimit,
    Retention,
    RoleSpec,
    membrane_home,
)
from membrane.durable.messages import Delivery
from membrane.extensions.select import ExtensionPaths
from membrane.json_types import JSONDict
from membrane.loop.outcome import ChildOutcome
from membrane.loop.permissions import PermissionGate
from membrane.loop.spending import Spending
from membrane.models.limiter import Lane, LaneLimits
from membrane.resolve import (
    Checkout,
    DefinitionRestriction,
    PromptSection,
    Sourced,
    ToolAdmission,
    TranscriptEntry,
)
from membrane.resolve.ceiling import Ceiling
from membrane.resolve.permissions import Permissions
from membrane.resolve.roles import RoleRestriction
from membrane.runtime.provider import (
    ChildComposition,
    ChildSpec,
    Provider,
    ProviderChild,
    SetupCallback,
)
from membrane.runtime.start import CatalogLike, DispatchLike
from membrane.runtime.tracing import RunTracer
from membrane.runtime.workflows import BoundWorkflow, WorkflowBinding
from membrane.runtime.worktree import Worktree, WorktreeManager, WorktreeOutcome
from membrane.sandbox.runner import SandboxPolicy
from membrane.store import (
    DeadLetter,
    Lease,
    LineageEdge,
    NewEdge,
    OutboxItem,
    PostgresStore,
    PruneReport,
    Receipt,
    SessionHeader,
    Store,
    StoredEvent,
    WorkflowRecord,
)
from membrane.store.base import (
    BudgetStore,
    LeaseStore,
    LineageStore,
    OutboxStore,
    ReceiptStore,
    RunStore,
    ScheduleStore,
    Transactional,
    TranscriptStore,
    WorkflowStore,
)
from membrane.store.migrations import Migration
from membrane.tools.permissions import ApprovalRequest, PermissionRule, ToolGate
from membrane.tools.registry import RegistryChange
from membrane.tools.restriction import ToolPredicate
from membrane.tools.rules import Condition
from membrane.tools.spec import Attachment, ToolOutput

__all__ = [
    "ApprovalRequest",
    "Attachment",
    "BoundWorkflow",
    "BudgetStore",
    "CatalogLike",
    "Ceiling",
    "Checkout",
    "ChildComposition",
    "ChildOutcome",
    "ChildSpec",
    "CommandHook",
    "Condition",
    "DeadLetter",
    "DefinitionRestriction",
    "DefinitionWarning",
    "Delivery",
    "Dialect",
    "Dispatch",
    "DispatchLike",
    "ExtensionPaths",
    "JSONDict",
    "Lane",
    "LaneLimits",
    "Lease",
    "LeaseStore",
    "LineageEdge",
    "LineageStore",
    "McpServerSpec",
    "Migration",
    "ModelEntry",
    "ModelPrice",
    "NewEdge",
    "OutboxItem",
    "OutboxStore",
    "PermissionGate",
    "PermissionRule",
    "Permissions",
    "PostgresStore",
    "ProductRule",
    "PromptSection",
    "Provider",
    "ProviderChild",
    "PruneReport",
    "RateLimit",
    "Receipt",
    "ReceiptStore",
    "RegistryChange",
    "Retention",
    "RoleRestriction",
    "RoleSpec",
    "RunStore",
    "RunTracer",
    "SandboxPolicy",
    "ScheduleStore",
    "SessionHeader",
    "SetupCallback",
    "Skill",
    "SkillCatalog",
    "Sourced",
    "Spending",
    "Store",
    "StoredEvent",
    "ToolAdmission",
    "ToolGate",
    "ToolOutput",
    "ToolPredicate",
    "ToolSink",
    "Transactional",
    "TranscriptEntry",
    "TranscriptStore",
    "Unset",
    "WorkflowBinding",
    "WorkflowRecord",
    "WorkflowStore",
    "Worktree",
    "WorktreeManager",
    "WorktreeOutcome",
    "membrane_home",
    "update_definition_text",
    "write_definition",
]
