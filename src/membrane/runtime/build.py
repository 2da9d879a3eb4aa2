"""Building one child: from its resolved authority to a provider's unpublished child.

``ChildBuilder.build`` is the one build step of both start entries (fresh and resumed): it
derives the child's ``ChildSetup`` (prompt sections, the three restrictions, scope-local and
delegation tools, the response schema) and ``ChildSpec``, has the provider create the child with
the one setup callback, and checks that setup ran exactly once. Nothing it builds is observable
until the start path publishes it; ``discard_child`` releases a child that never will be.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from membrane.agents.definition import UNSET, AgentDefinition, or_else
from membrane.agents.settings_hooks import settings_hooks
from membrane.builtin_tools.skill import bind_skill_tool
from membrane.config.model_names import resolve_spec
from membrane.config.values import Settings
from membrane.errors import (
    ExtraNotInstalled,
    InvalidRequest,
    MembraneError,
    ModelAuthFailed,
    ModelNotAllowed,
    ModelPriceUnknown,
    SetupFailed,
    UnknownModel,
)
from membrane.loop.calls import Emit
from membrane.loop.command_hooks import CommandHookGate, CommandHooks
from membrane.loop.outside_reads import outside_reads
from membrane.loop.permissions import PermissionGate
from membrane.models.limiter import LaneLimits, ModelLimiter
from membrane.models.prices import Prices
from membrane.resolve.authority import Deployment, EffectiveAuthority, ParentContext
from membrane.resolve.ceiling import CeilingRestriction, ceiling_of_run
from membrane.resolve.invocation import Sourced
from membrane.resolve.prompt import PromptSection
from membrane.runtime.budget import RunSpending
from membrane.runtime.delegation import (
    DelegationConfig,
    DelegationHost,
    delegation_tools,
    follow_catalog,
)
from membrane.runtime.environment import capability_mode, child_environment
from membrane.runtime.persona import persona_values
from membrane.runtime.provider import ChildComposition, ChildSpec, Provider, ProviderChild
from membrane.runtime.questions import Questions, ask_parent_tool
from membrane.runtime.request import SubagentStartRequest
from membrane.runtime.runs import RunRecord
from membrane.runtime.setup import ChildSetup, SetupStep
from membrane.runtime.workflows import WorkflowBinder
from membrane.runtime.worktree import Worktree
from membrane.sandbox.runner import SandboxPolicy
from membrane.tools.permissions import Approver, PermissionRule, ToolGate
from membrane.tools.registry import ToolRegistry
from membrane.tools.restriction import ToolPredicate
from membrane.tools.scope import Scope
from membrane.tools.spec import ReadApproval, Tool

__all__ = ["ChildBuilder", "discard_child"]


class ChildBuilder:
    """Builds the children of one runtime on ``provider``.

    ``host`` is what the delegation tools of a child that may delegate call (the runtime's
    public API); ``emitter(run_id)`` is a child's ``emit`` callback; ``deployment()`` is the
    deployment as of now (its skill files and roots); ``on_step`` observes each step of every
    child's setup; ``child_env(run_id, cwd)`` adds variables to the child's environment (and
    its tools' processes), as ``membrane serve`` does with the run's ``MEMBRANE_TOKEN``.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        registry: ToolRegistry,
        settings: Settings,
        project: Path | None,
        delegation: DelegationConfig,
        host: DelegationHost,
        emitter: Callable[[str], Emit],
        deployment: Callable[[], Deployment],
        on_step: SetupStep | None = None,
        child_env: Callable[[str, Path | None], Mapping[str, str]] | None = None,
        workflows: WorkflowBinder | None = None,
        approver: Approver | None = None,
        barrier: Callable[[str], Callable[[], Awaitable[None]]] | None = None,
        questions: Questions | None = None,
    ) -> None:
        if on_step is not None and not callable(on_step):
            raise InvalidRequest("on_setup_step must be callable", field="on_setup_step")
        self._provider = provider
        self._registry = registry
        self._settings = settings
        self._prices = Prices(settings.models)
        self._project = project
        self._delegation = delegation
        self._host = host
        self._emitter = emitter
        self._deployment = deployment
        self._on_step = on_step
        self._child_env = child_env
        self._workflows = workflows
        self._approver = approver
        self._barrier = barrier
        self._questions = questions
        #: The lanes of definitions that limit their own model requests, by agent name.
        self._agent_lanes = ModelLimiter()

    async def build(
        self,
        run_id: str,
        request: SubagentStartRequest,
        authority: EffectiveAuthority,
        context: ParentContext,
        *,
        depth: int,
        role: ToolPredicate | None,
        worktree: Worktree | None,
        built: list[ProviderChild] | None = None,
        resumed: bool = False,
        continued: bool = False,
        spending: RunSpending | None = None,
        deployment: Deployment | None = None,
    ) -> RunRecord:
        """The child of ``request``, built by the provider with its setup (prompt, restrictions,
        scope-local and delegation tools), not yet published. It is appended to ``built`` as
        soon as it exists, so that a caller's rollback can discard it. ``resumed``: the child
        continues the stored run ``run_id`` (``ChildSpec.resumed``); ``continued``: with no new
        message (a worker driving a queued run from its stored conversation). ``deployment``:
        the one the start resolved against (its skill files and roots), else the deployment
        now."""
        definition = authority.definition
        invocation = authority.invocation
        bound = None if self._workflows is None else self._workflows(run_id, definition)
        model = _text_or_none(invocation["model"].value)
        if spending is not None and spending.costed:
            self._check_prices(model, _fallbacks(invocation), spending)
        max_turns = invocation["max_turns"].value
        if max_turns is None:
            max_turns = self._settings.default_max_turns
        cwd: Path | None = None
        if worktree is not None:
            cwd = worktree.cwd
        elif authority.checkout.path:
            cwd = Path(authority.checkout.path)
        restrictions: list[ToolPredicate] = [authority.restriction]
        restrictions += [p for p in (request.restriction, role) if p is not None]
        if not authority.ceiling.empty:
            # DESIGN rule 13, live: a tool registered after the start is held to it too.
            restrictions.append(CeilingRestriction(authority.ceiling))
        if deployment is None:
            deployment = self._deployment()
        local = self._local_tools(run_id, request, authority, context, definition, deployment)
        # The resolver's own tuple when nothing is added: setup composes it once for them all.
        sections: Sequence[PromptSection] = authority.prompt_sections
        if self._workflows is not None:
            local += self._workflows.worker_tools(request.parent_id, run_id)
        if bound is not None:
            local += list(bound.tools)
            workflow = PromptSection(f"workflow:{bound.name}", bound.prompt, "child")
            sections = [*sections, workflow]
        setup = ChildSetup(
            run_id=run_id,
            sections=sections,
            persona_values=persona_values(
                agent=definition.name,
                agent_type=request.agent_type,
                cwd="" if cwd is None else str(cwd),
                depth=depth,
                model=model,
                parent_id=request.parent_id,
                project=None if self._project is None else str(self._project),
                run_id=run_id,
            ),
            restrictions=restrictions,
            local_tools=local,
            gates=() if bound is None else (bound.gate,),
            call_gate=self._gate(run_id, authority, context, _own_rules(request)),
            response_schema=request.response_schema,
            checkout=None
            if worktree is None or not authority.checkout.path
            else (authority.checkout.path, str(worktree.cwd)),
            on_step=self._on_step,
        )
        composed: list[ChildComposition] = []

        def install(scope: Scope) -> ChildComposition:
            composition = setup(scope)
            if "Task" in authority.delegation_tools:
                allowed = definition.allowed_subagents
                follow_catalog(
                    scope,
                    self._host,
                    parent_id=run_id,
                    allowed=() if allowed is UNSET else allowed,
                    config=self._delegation,
                    role=request.role,
                )
            composed.append(composition)
            return composition

        env = child_environment(skill_roots=deployment.skill_roots)
        if self._child_env is not None:
            env.update(self._child_env(run_id, cwd))
        spec = ChildSpec(
            run_id=run_id,
            agent=definition.name,
            request=request,
            registry=self._registry,
            task="" if continued else authority.task_prefix + request.task,
            depth=depth,
            emit=self._emitter(run_id),
            parent_id=request.parent_id,
            cwd=cwd,
            model=model,
            planning=authority.permissions.mode == "plan",
            fallback_models=_fallbacks(invocation),
            thinking=_text_or_none(invocation["thinking"].value),
            tool_choice=_text_or_none(invocation["tool_choice"].value),
            max_turns=max_turns if isinstance(max_turns, int) else None,
            grace_turns=self._settings.grace_turns,
            response_schema=request.response_schema,
            transcript=tuple(context.transcript),  # type: ignore[arg-type]
            extensions=tuple(authority.extensions_loaded),
            resumed=resumed,
            spending=spending,
            price=self._prices.cost,
            request_lane=self._agent_lanes.lane(
                f"agent:{definition.name}",
                LaneLimits(
                    requests_per_minute=or_else(definition.requests_per_minute, None),
                    max_concurrent_requests=or_else(definition.max_concurrent_requests, None),
                ),
            ),
            barrier=None if self._barrier is None else self._barrier(run_id),
            network=authority.network.value,
            read_paths=authority.own_read_roots,
            writes=authority.writes,
            env=env,
            ask_read=self._ask_read(authority, _own_rules(request)),
        )
        mode = capability_mode(on_view=self._provider.capabilities.tool_filter, env=spec.env)
        child = await self._create(spec, install)
        if built is not None:
            built.append(child)
        if len(composed) != 1:
            raise SetupFailed(
                f"provider {self._provider.name!r} returned child {run_id!r} without running its "
                "setup exactly once; nothing was published",
                run_id=run_id,
                step="provider",
            )
        return RunRecord(
            run_id=run_id,
            agent=definition.name,
            agent_type=request.agent_type,
            parent_id=request.parent_id,
            depth=depth,
            background=invocation["run_in_background"].value is True,
            provider=self._provider.name,
            child=child,
            system=composed[0].system,
            model=model,
            permission_mode=authority.permissions.mode,
            role=request.role,
            cwd=None if cwd is None else str(cwd),
            network=spec.network,
            read_paths=spec.read_paths,
            env=spec.env,
            worktree=worktree,
            skills=authority.skills,
            ceiling=ceiling_of_run(
                authority.ceiling,
                definition,
                by=run_id,
                mode=authority.permissions.mode,
                tool_filter=request.restriction,
                root=None if worktree is None else str(worktree.cwd),
                request_rules=_own_rules(request),
            ),
            spending=spending,
            capability_mode=mode,
            queued=self._provider.capabilities.queued,
        )

    def _ask_read(
        self, authority: EffectiveAuthority, extra: tuple[PermissionRule, ...] = ()
    ) -> ReadApproval | None:
        """How the child's built-in reads outside its read roots go to the host: down the
        ``ask`` path under its permission mode (``read_outside = "ask"``), or ``None``."""
        if self._settings.read_outside != "ask":
            return None
        rules = (*authority.ceiling.held_rules, *authority.permissions.rules, *extra)
        return outside_reads(mode=authority.permissions.mode, approver=self._approver, rules=rules)

    def _gate(
        self,
        run_id: str,
        authority: EffectiveAuthority,
        context: ParentContext,
        extra: tuple[PermissionRule, ...] = (),
    ) -> ToolGate | None:
        """The child's call gate: its own rules (and the start request's ``extra`` argument
        rules) and, when it inherits, its parent's (never the parent's command hooks: those run
        for the parent alone); its command hooks around them when its definition or the
        settings files (``membrane.agents.settings_hooks``) have any."""
        permissions = authority.permissions
        parent = context.call_gate if permissions.inherits_parent else None
        if isinstance(parent, CommandHookGate):
            parent = parent.rules
        ceiling_rules = authority.ceiling.held_rules
        if ceiling_rules:
            # DESIGN rule 13: the rules every ancestor held, checked before the child's own.
            parent = PermissionGate(
                ceiling_rules, mode=permissions.mode, approver=self._approver, parent=parent
            )
        own_hooks = authority.definition.hooks
        # The settings files' hooks fire for every agent of the tree, after its own.
        hooks = (
            *(own_hooks if isinstance(own_hooks, tuple) else ()),
            *settings_hooks(self._settings, agent=authority.definition.name, depth=authority.depth),
        )
        own = (*permissions.rules, *extra)
        if not own and not permissions.by_rules and parent is None and not hooks:
            return None
        rules = PermissionGate(
            own,
            by_rules=permissions.by_rules,
            mode=permissions.mode,
            approver=self._approver,
            parent=parent,
            approvals=tuple(r for r in ceiling_rules if r.verdict == "allow" and not r.conditions),
        )
        if not hooks:
            return rules
        runner = CommandHooks(
            hooks,
            policy=SandboxPolicy.from_settings(self._settings),
            emit=self._emitter(run_id),
            mode=permissions.mode,
        )
        return CommandHookGate(runner, rules)

    def _check_prices(
        self, model: str | None, fallbacks: tuple[str, ...], spending: RunSpending
    ) -> None:
        """Refuse (``model-price-unknown``) a child under a ``cost`` budget whose model or a
        fallback has no known price. A child that names no model, in a deployment with no
        ``default_model``, runs on the host's model: it is priced at its first response."""
        settings = self._settings
        for spec in (model or settings.default_model, *fallbacks):
            if spec is None:
                continue
            choice = resolve_spec(spec, models=settings.models, aliases=settings.model_aliases)
            label = f"{choice.provider}:{choice.model}"
            if not spending.priced(label):
                raise ModelPriceUnknown(
                    f"model {spec!r} ({label}) has no known price, and a cost budget is in "
                    f"force: give its [models.NAME] entry a price (price = {{input = ..., "
                    "output = ...}, dollars per million tokens)",
                    model=label,
                    spec=spec,
                )

    async def _create(self, spec: ChildSpec, install: object) -> ProviderChild:
        provider = self._provider
        try:
            return await provider.create(spec, install)  # type: ignore[arg-type]
        except (SetupFailed, UnknownModel, ModelNotAllowed, ModelAuthFailed, ExtraNotInstalled):
            raise  # the model the child names cannot be had: say so as it is
        except (MembraneError, Exception) as exc:
            detail = (
                exc.message if isinstance(exc, MembraneError) else f"{type(exc).__name__}: {exc}"
            )
            raise SetupFailed(
                f"provider {provider.name!r} could not build child {spec.run_id!r}: {detail}; "
                "nothing was published",
                run_id=spec.run_id,
                step="provider",
                cause=exc.code if isinstance(exc, MembraneError) else None,
            ) from exc

    def _local_tools(
        self,
        run_id: str,
        request: SubagentStartRequest,
        authority: EffectiveAuthority,
        context: ParentContext,
        definition: AgentDefinition,
        deployment: Deployment,
    ) -> list[Tool]:
        tools = [context.tools[name] for name in authority.inherited_local_tools]
        if authority.delegation_tools:
            allowed = definition.allowed_subagents
            tools += delegation_tools(
                self._host,
                parent_id=run_id,
                allowed=() if allowed is UNSET else allowed,
                config=self._delegation,
                role=request.role,
                names=authority.delegation_tools,
            )
        if authority.ask_parent and self._questions is not None:
            tools.append(ask_parent_tool(self._questions))
        return bind_skill_tool(tools, authority.skills, deployment.skill_files)


async def discard_child(child: object) -> None:
    """Release what a provider allocated for a child that is never published: its optional
    ``discard()`` (plain or async). A failure there never hides the error being rolled back."""
    discard = getattr(child, "discard", None)
    if not callable(discard):
        return
    with contextlib.suppress(Exception):
        outcome = discard()
        if inspect.isawaitable(outcome):
            await outcome


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _own_rules(request: SubagentStartRequest) -> tuple[PermissionRule, ...]:
    """The start request's argument rules (read into rules when the request was made)."""
    rules = request.rules
    return tuple(r for r in rules if isinstance(r, PermissionRule)) if rules else ()


def _fallbacks(invocation: Mapping[str, Sourced[object]]) -> tuple[str, ...]:
    chosen = invocation.get("fallback_models")
    value = None if chosen is None else chosen.value
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, tuple) else ()
