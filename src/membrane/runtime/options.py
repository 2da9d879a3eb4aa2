"""``RuntimeOptions``: the knobs of a ``SubagentRuntime``, in one value.

Every field is optional; what a field leaves out has the documented default. A runtime takes
its catalog, registry and provider (and a store) as arguments, and everything else here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from membrane.agents.definition import AgentDefinition
from membrane.config.values import Settings
from membrane.errors import InvalidRequest
from membrane.resolve.authority import Deployment
from membrane.runtime.delegation import DelegationConfig
from membrane.runtime.setup import SetupStep
from membrane.runtime.tracing import RunTracer
from membrane.runtime.workflows import WorkflowBinding
from membrane.runtime.worktree import WorktreeManager
from membrane.tools.permissions import Approver
from membrane.tools.registry import ToolRegistry

__all__ = ["RuntimeOptions", "checked_parts"]


@dataclass(frozen=True, slots=True)
class RuntimeOptions:
    """How a runtime runs its children.

    * ``settings``: the deployment settings (default: the catalog's, else ``Settings()``);
    * ``project``: the project folder; it enables worktrees (and their orphan pruning when the
      runtime opens);
    * ``deployment``: what the deployment contributes to resolution (extensions, their prompt
      sections, skills, the environment text); the live registry and the catalog's definitions
      are filled in at each start;
    * ``worktrees``: the worktree manager (default: one for ``project`` when worktrees are
      enabled in the settings);
    * ``delegation``: what the delegation tools copy into each request (default: the
      settings' ``max_depth``); checked against the provider when the runtime is built;
    * ``on_setup_step``: observes each step of every child's unpublished setup;
    * ``memory``: reads an agent's ``MEMORY.md`` text by memory scope (``Workspace.memory_for``
      does) so that it reaches the child's prompt;
    * ``child_env``: the environment variables of one run from its id and checkout
      (``membrane serve`` passes the run's ``MEMBRANE_TOKEN``); a subprocess child gets them,
      and so does every process the child's tools start (its ``Bash``);
    * ``workflows``: the gated workflows a definition may opt into (``workflow: NAME``), by
      name (``membrane.workflow.builtin_workflows()``); a definition naming one not given here
      fails closed with ``unknown-workflow``.
    * ``approver``: answers the calls an ``ask`` permission rule holds (``ApprovalRequest`` ->
      ``True`` to run it); without one such a call fails with ``approval-unavailable``;
    * ``tracer``: a ``RunTracer`` that turns every run's events into OpenTelemetry spans;
    * ``on_end``: called with a run's id once it has ended and its end is delivered (each
      time: a resumed run ends again), so that what a host keeps per run can go with it
      (``membrane serve`` drops the run's checkout, role and model);
    * ``handoff``: queues a run of the ``dbos`` provider again when its worker stopped
      renewing its lease (``DbosProvider.handoff``; the sweeper calls it), so that another
      worker goes on with it.
    """

    settings: Settings | None = None
    project: Path | None = None
    deployment: Deployment | None = None
    worktrees: WorktreeManager | None = None
    delegation: DelegationConfig | None = None
    on_setup_step: SetupStep | None = None
    memory: Callable[[AgentDefinition], Mapping[str, str]] | None = None
    child_env: Callable[[str, Path | None], Mapping[str, str]] | None = None
    workflows: Mapping[str, WorkflowBinding] | None = None
    approver: Approver | None = None
    tracer: RunTracer | None = None
    on_end: Callable[[str], None] | None = None
    handoff: Callable[[str], bool] | None = None


def checked_parts(
    options: RuntimeOptions | None, *, registry: object, provider: object
) -> RuntimeOptions:
    """The options a runtime is built with (the defaults for ``None``), once its registry and
    provider are of the right kinds; anything else is ``invalid-request`` naming the part."""
    options = options if options is not None else RuntimeOptions()
    if not isinstance(options, RuntimeOptions):
        raise InvalidRequest("options must be a RuntimeOptions", field="options")
    if not isinstance(registry, ToolRegistry):
        raise InvalidRequest("registry must be a ToolRegistry", field="registry")
    for attr in ("name", "capabilities", "create"):
        if not hasattr(provider, attr):
            raise InvalidRequest(
                f"provider lacks {attr!r}; a Provider has name, capabilities and create()",
                field="provider",
            )
    return options
