"""The start path from a validated request to a published child (steps 3-7 of the runtime).

Nothing here is observable until publication: depth is derived and checked, the definition
dispatched (and, for a delegation tool, checked against the parent's ``allowed_subagents``)
and resolved, the worktree made, the child built by the provider with the one setup callback.
A failure at any point rolls back what exists (the provider's ``discard()`` when the child has
one, the worktree finished without success, the private scope dropped) and publishes nothing.

Publication (``membrane.runtime.publish``) re-checks, in the synchronous step that commits it,
that the runtime is not closing and that the parent has neither ended nor been asked to stop:
both can change during the awaits above, and a child published after its parent's end would
never be stopped. ``build`` and ``parent_context`` are also the resume path's (``resume``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import uuid
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio

from membrane.agents.definition import UNSET, AgentDefinition
from membrane.builtin_tools.skill import bind_skill_tool
from membrane.errors import (
    InvalidRequest,
    MembraneError,
    SetupFailed,
    UnknownRun,
    UnknownSubagent,
    WorktreeUnavailable,
)
from membrane.limits import child_depth
from membrane.resolve import CallParams
from membrane.resolve.authority import EffectiveAuthority, ParentContext, resolve
from membrane.runtime.delegation import agent_allowed, delegation_tools, not_allowed
from membrane.runtime.depth import check_cap, effective_parent_depth
from membrane.runtime.environment import child_environment
from membrane.runtime.provider import ChildComposition, ChildSpec, Provider, ProviderChild
from membrane.runtime.publish import publish
from membrane.runtime.request import SubagentStartRequest
from membrane.runtime.runs import RunRecord
from membrane.runtime.setup import ChildSetup, SetupStep
from membrane.runtime.worktree import Worktree
from membrane.tools.restriction import Restriction, ToolPredicate
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool

if TYPE_CHECKING:
    from membrane.runtime.runtime import SubagentRuntime

__all__ = ["CatalogLike", "DispatchLike", "Spawner", "discard_child", "new_run_id"]

#: The depth of the host above a top-level agent, so that the top level is depth 0.
_HOST_DEPTH = -1


class DispatchLike(Protocol):
    """What the spawner reads of a ``catalog.dispatch()`` result."""

    @property
    def definition(self) -> AgentDefinition: ...

    @property
    def note(self) -> str | None: ...


class CatalogLike(Protocol):
    """What the runtime needs of a ``Catalog``."""

    def reload(self) -> object: ...

    def dispatch(self, agent_type: str, *, child: bool = True) -> DispatchLike: ...

    def definitions(self) -> Mapping[str, AgentDefinition]: ...


def new_run_id() -> str:
    return uuid.uuid4().hex[:16]


class Spawner:
    """Builds and publishes children for one runtime.

    ``provider`` builds the children (default: the runtime's); a resume passes one that
    continues a stored transcript. ``on_step`` observes each step of every child's setup.
    """

    def __init__(
        self,
        runtime: SubagentRuntime,
        *,
        on_step: SetupStep | None = None,
        provider: Provider | None = None,
    ) -> None:
        if on_step is not None and not callable(on_step):
            raise InvalidRequest("on_setup_step must be callable", field="on_setup_step")
        self._rt = runtime
        self._on_step = on_step
        self._provider = provider if provider is not None else runtime.provider

    async def spawn(
        self,
        request: SubagentStartRequest,
        *,
        role: Restriction | None,
        allowed: tuple[str, ...] | None = None,
    ) -> RunRecord:
        """Build and publish one child. ``allowed``: the names the dispatched definition must
        match (``allowed_subagents``), ``None`` for a trusted caller with no such bound."""
        rt = self._rt
        rt.check_publishable(request.parent_id)
        parent = rt._live_run(request.parent_id) if request.parent_id is not None else None
        parent_depth, depth = self._depths(request, parent)
        check_cap(depth, request.max_depth, agent=request.agent_type, parent_id=request.parent_id)
        rt.catalog.reload()
        dispatch = self._dispatch(request.agent_type, allowed, child=parent_depth >= 0)
        run_id = new_run_id()
        context = self.parent_context(parent, parent_depth)
        authority = resolve(
            dispatch.definition,
            _call(request),
            context,
            rt.deployment(dispatch.definition),
            persona=UNSET if request.persona is None else request.persona,
            tool_filter=request.restriction,
            role=role,
            depth=depth,
        )
        worktree = await self._worktree(run_id, authority)
        built: list[ProviderChild] = []
        try:
            record = await self.build(
                run_id,
                request,
                authority,
                context,
                depth=depth,
                role=role,
                worktree=worktree,
                built=built,
            )
            publish(rt, record, authority=authority, request=request, note=dispatch.note)
        except BaseException:
            with anyio.CancelScope(shield=True):
                for child in built:
                    await discard_child(child)
                if worktree is not None and rt.worktrees is not None:
                    await anyio.to_thread.run_sync(
                        partial(rt.worktrees.finish, worktree, success=False)
                    )
            raise
        return record

    def _dispatch(
        self, agent_type: str, allowed: tuple[str, ...] | None, *, child: bool = True
    ) -> DispatchLike:
        """``catalog.dispatch``, bounded by ``allowed``: the definition that would really run
        (after any fallback) must be allowed, and a refusal names only allowed agents."""
        catalog = self._rt.catalog
        if allowed is None:
            return catalog.dispatch(agent_type, child=child)
        try:
            dispatch = catalog.dispatch(agent_type, child=child)
        except UnknownSubagent:
            # The catalog's message lists every known agent; the caller may learn only its own.
            raise not_allowed(agent_type, allowed) from None
        if not agent_allowed(allowed, dispatch.definition.name):
            raise not_allowed(agent_type, allowed)
        return dispatch

    def _depths(self, request: SubagentStartRequest, parent: RunRecord | None) -> tuple[int, int]:
        parent_id = request.parent_id
        if parent_id is None:
            return _HOST_DEPTH, 0
        header = self._rt.store.get_header(parent_id)
        if header is None and parent is None:
            raise UnknownRun(
                f"no session {parent_id!r} to start a child under: it is neither running here "
                "nor stored",
                run_id=parent_id,
            )
        parent_depth = effective_parent_depth(
            stored=None if header is None else header.delegation_depth,
            live=None if parent is None else parent.depth,
            parent_id=parent_id,
        )
        return parent_depth, child_depth(parent_depth, what=f"delegation depth of {parent_id!r}")

    def parent_context(self, parent: RunRecord | None, parent_depth: int) -> ParentContext:
        """What a child of ``parent`` (``None``: the host, at ``parent_depth``) inherits from
        it: tools, live views of them, prompt, model, transcript, permission mode, cwd."""
        rt = self._rt
        if parent is None:
            registry = rt.registry
            # The host sits above depth 0; the child's own depth is passed to ``resolve``.
            return ParentContext(
                tools=registry.tools(),
                cwd=None if rt.project is None else str(rt.project),
                permission_mode=rt.settings.permission_mode,
                live=registry.tools,
                live_stamp=lambda: registry.version,
            )
        scope = parent.child.scope

        def live() -> Mapping[str, Tool]:
            return {tool.name: tool for tool in scope.view().tools()}

        return ParentContext(
            tools=live(),
            system_prompt=parent.system,
            model=parent.model,
            transcript=parent.child.messages(),
            permission_mode=parent.permission_mode,
            depth=parent_depth,
            cwd=parent.cwd,
            live=live,
            live_stamp=lambda: scope.view().key,
            skills=parent.skills,
        )

    async def _worktree(self, run_id: str, authority: EffectiveAuthority) -> Worktree | None:
        if authority.checkout.kind != "worktree":
            return None
        manager = self._rt.worktrees
        if manager is None:
            raise WorktreeUnavailable(
                f"{authority.definition.name!r} asks for isolation: worktree, but this runtime "
                "has no project (or worktrees are disabled in settings); nothing was started",
                run_id=run_id,
            )
        return await anyio.to_thread.run_sync(manager.create, run_id)

    async def build(
        self,
        run_id: str,
        request: SubagentStartRequest,
        authority: EffectiveAuthority,
        context: ParentContext,
        *,
        depth: int,
        role: Restriction | None,
        worktree: Worktree | None,
        built: list[ProviderChild] | None = None,
        resumed: bool = False,
    ) -> RunRecord:
        """The child of ``request``, built by the provider with its setup (prompt, restrictions,
        scope-local and delegation tools), not yet published. It is appended to ``built`` as
        soon as it exists, so that a caller's rollback can discard it. ``resumed``: the child
        continues the stored run ``run_id`` (``ChildSpec.resumed``)."""
        rt = self._rt
        definition = authority.definition
        invocation = authority.invocation
        model = _text_or_none(invocation["model"].value)
        max_turns = invocation["max_turns"].value
        if max_turns is None:
            max_turns = rt.settings.default_max_turns
        cwd: Path | None = None
        if worktree is not None:
            cwd = worktree.cwd
        elif authority.checkout.path:
            cwd = Path(authority.checkout.path)
        restrictions: list[ToolPredicate] = [authority.restriction]
        restrictions += [p for p in (request.restriction, role) if p is not None]
        setup = ChildSetup(
            run_id=run_id,
            sections=authority.prompt_sections,
            persona_values={
                "agent": definition.name,
                "agent_type": request.agent_type,
                "cwd": "" if cwd is None else str(cwd),
                "depth": str(depth),
                "model": model or "",
                "parent_id": request.parent_id or "",
                "project": "" if rt.project is None else str(rt.project),
                "run_id": run_id,
            },
            restrictions=restrictions,
            local_tools=self._local_tools(run_id, request, authority, context, definition),
            response_schema=request.response_schema,
            checkout=None
            if worktree is None or not authority.checkout.path
            else (authority.checkout.path, str(worktree.cwd)),
            on_step=self._on_step,
        )
        composed: list[ChildComposition] = []

        def install(scope: Scope) -> ChildComposition:
            composition = setup(scope)
            composed.append(composition)
            return composition

        spec = ChildSpec(
            run_id=run_id,
            agent=definition.name,
            request=request,
            registry=rt.registry,
            task=authority.task_prefix + request.task,
            depth=depth,
            emit=rt._emitter(run_id),
            parent_id=request.parent_id,
            cwd=cwd,
            model=model,
            thinking=_text_or_none(invocation["thinking"].value),
            max_turns=max_turns if isinstance(max_turns, int) else None,
            grace_turns=rt.settings.grace_turns,
            response_schema=request.response_schema,
            transcript=tuple(context.transcript),  # type: ignore[arg-type]
            extensions=tuple(authority.extensions_loaded),
            resumed=resumed,
            env=child_environment(skill_roots=rt.deployment().skill_roots),
        )
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
            provider=rt.provider.name,
            child=child,
            system=composed[0].system,
            model=model,
            permission_mode=str(invocation["permission"].value),
            role=request.role,
            cwd=None if cwd is None else str(cwd),
            worktree=worktree,
            skills=authority.skills,
        )

    async def _create(self, spec: ChildSpec, install: object) -> ProviderChild:
        provider = self._provider
        try:
            return await provider.create(spec, install)  # type: ignore[arg-type]
        except SetupFailed:
            raise
        except (MembraneError, Exception) as exc:
            detail = (
                exc.message if isinstance(exc, MembraneError) else f"{type(exc).__name__}: {exc}"
            )
            raise SetupFailed(
                f"provider {provider.name!r} could not build child {spec.run_id!r}: {detail}; "
                "nothing was published",
                run_id=spec.run_id,
                step="provider",
                cause=getattr(exc, "code", None),
            ) from exc

    def _local_tools(
        self,
        run_id: str,
        request: SubagentStartRequest,
        authority: EffectiveAuthority,
        context: ParentContext,
        definition: AgentDefinition,
    ) -> list[Tool]:
        tools = [context.tools[name] for name in authority.inherited_local_tools]
        if authority.delegation_tools:
            allowed = definition.allowed_subagents
            tools += delegation_tools(
                self._rt,
                parent_id=run_id,
                allowed=() if allowed is UNSET else allowed,
                config=self._rt.delegation,
                role=request.role,
                names=authority.delegation_tools,
            )
        return bind_skill_tool(tools, authority.skills, self._rt.deployment().skill_files)


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


def _call(request: SubagentStartRequest) -> CallParams:
    """The call fields with ``background`` folded in (``validate_request`` ruled out a clash)."""
    call = request.call
    if request.background is None or call.run_in_background is not UNSET:
        return call
    return dataclasses.replace(call, run_in_background=request.background)


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
