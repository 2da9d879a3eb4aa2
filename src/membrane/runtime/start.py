"""The start path: from a checked request (or a stored run) to a published child.

One build path with two entries. ``StartPath.fresh`` starts a new child; ``StartPath.resumed``
starts a stored run again under its own id. Each entry works out what only it knows (the
depths, the run id, the request, and for a resume the stored conversation) as an ``_Entry``;
``_start`` then runs the one path both share:

``catalog.reload()`` -> ``dispatch`` (bounded by ``allowed_subagents`` when a delegation tool
asks) -> the parent's context -> ``resolve()`` (memoized for the host's children,
``membrane.runtime.resolution``) -> the worktree (fresh only: a worktree ended
with its run's first life) -> ``ChildBuilder.build`` -> publication (``Publisher``) -> on any
failure, rollback: the provider's ``discard()``, the worktree finished without success, and
nothing published.

Nothing here is observable until publication, which re-checks, in the synchronous step that
commits it, that the runtime is not closing and that the parent has neither ended nor been
asked to stop: both can change during the awaits above, and a child published after its
parent's end would never be stopped. The collaborators are passed in; nothing here reaches
back into the runtime that made it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Final, Protocol

import anyio

from membrane.agents.definition import UNSET, AgentDefinition
from membrane.config.budget import Budget, tighter
from membrane.config.values import Settings
from membrane.durable.lineage import has_running_edge
from membrane.errors import (
    InvalidRequest,
    UnknownRun,
    UnknownSubagent,
    UnsupportedCapability,
    WorktreeUnavailable,
)
from membrane.limits import check_depth, child_depth
from membrane.models.base import Message
from membrane.resolve import CallParams
from membrane.resolve.authority import Deployment, EffectiveAuthority, ParentContext
from membrane.resolve.ceiling import Ceiling
from membrane.runtime.budget import Budgets, Ledger, RunSpending
from membrane.runtime.build import ChildBuilder, discard_child
from membrane.runtime.delegation import agent_allowed, not_allowed
from membrane.runtime.depth import check_cap, effective_parent_depth
from membrane.runtime.provider import Provider, ProviderChild
from membrane.runtime.publish import CEILING_BELOW_KEY, CEILING_KEY, Publisher
from membrane.runtime.request import NO_CALL, SubagentStartRequest
from membrane.runtime.resolution import HOST, ResolutionMemo
from membrane.runtime.resume import resumed_depths, stored_history, stored_request
from membrane.runtime.runs import LiveRuns, RunRecord
from membrane.runtime.worktree import Worktree, WorktreeManager
from membrane.store.base import Store
from membrane.tools.registry import ToolRegistry
from membrane.tools.restriction import ToolPredicate
from membrane.tools.spec import Tool
from membrane.vocabulary import END_STATES

__all__ = ["CatalogLike", "DispatchLike", "StartPath", "new_run_id"]

#: The brief of a request that continues a stored run with no new message; no model sees it.
_CONTINUED: Final = "(continued from its stored conversation)"


class DispatchLike(Protocol):
    """What the start path reads of a ``catalog.dispatch()`` result."""

    @property
    def definition(self) -> AgentDefinition: ...

    @property
    def note(self) -> str | None: ...


class CatalogLike(Protocol):
    """What the runtime needs of a ``Catalog``."""

    def reload(self) -> object: ...

    def dispatch(self, agent_type: str, *, child: bool = True) -> DispatchLike: ...

    def definitions(self) -> Mapping[str, AgentDefinition]: ...


class _RunIds:
    """Run ids: 16 hex digits of the OS's randomness (64 bits), read 4 KiB at a time (one
    ``getrandom`` per 512 ids instead of one per id). A forked process starts a pool of its
    own, so parent and child never hand out the same id."""

    __slots__ = ("_pool",)

    def __init__(self) -> None:
        self._pool = ""

    def next(self) -> str:
        if not self._pool:
            self._pool = os.urandom(4096).hex()
        run_id, self._pool = self._pool[:16], self._pool[16:]
        return run_id

    def forget(self) -> None:
        self._pool = ""


_RUN_IDS = _RunIds()
os.register_at_fork(after_in_child=_RUN_IDS.forget)


def new_run_id() -> str:
    return _RUN_IDS.next()


@dataclass(slots=True)
class _Entry:
    """What one entry contributes to the shared path. ``history`` is ``None`` for a fresh
    start, and the stored conversation a resumed run continues from otherwise. Never changed
    once made (not frozen: a frozen value's fields cost a call each to set, every start)."""

    run_id: str
    request: SubagentStartRequest
    parent: RunRecord | None
    parent_depth: int
    depth: int
    role: ToolPredicate | None
    allowed: tuple[str, ...] | None = None
    history: tuple[Message, ...] | None = None
    has_edge: bool = False
    #: The stored ceiling the child is held to besides its parent's (``None``: none): a
    #: resumed run's own, or the one a stored parent not running here passes down.
    ceiling: Ceiling | None = None
    #: Dispatched as a child (a top-level start from the host may run a primary agent).
    child: bool = True
    #: A resume with no new message: the run goes on from its stored conversation.
    continued: bool = False


class StartPath:
    """Builds and publishes the children of one runtime.

    ``deployment(definition)`` is the deployment as of now (live registry, the catalog's
    definitions, the definition's memory); ``roles(name)`` is a trusted role's restriction.
    """

    def __init__(
        self,
        *,
        store: Store,
        registry: ToolRegistry,
        catalog: CatalogLike,
        provider: Provider,
        settings: Settings,
        project: Path | None,
        worktrees: WorktreeManager | None,
        runs: LiveRuns,
        builder: ChildBuilder,
        publisher: Publisher,
        deployment: Callable[[AgentDefinition | None], Deployment],
        roles: Callable[[str | None], ToolPredicate | None],
        gate: Callable[[str | None], None],
        budgets: Budgets,
    ) -> None:
        self._store = store
        self._registry = registry
        self._catalog = catalog
        self._provider = provider
        self._settings = settings
        self._project = project
        self._worktrees = worktrees
        self._runs = runs
        self._builder = builder
        self._publisher = publisher
        self._deployment = deployment
        self._roles = roles
        self._gate = gate
        self._budgets = budgets
        self._resolutions = ResolutionMemo()
        #: The host's context, kept while the registry's snapshot of its tools is the same.
        self._host: ParentContext | None = None

    # -- the two entries ------------------------------------------------------------------------

    async def fresh(
        self,
        request: SubagentStartRequest,
        *,
        role: ToolPredicate | None,
        allowed: tuple[str, ...] | None = None,
        ceiling: Ceiling | None = None,
    ) -> RunRecord:
        """Build and publish one new child. ``allowed``: the names the dispatched definition
        must match (``allowed_subagents``), ``None`` for a trusted caller with no such bound;
        ``ceiling``: one the child is held to besides its parent's."""
        self._gate(request.parent_id)
        parent = self._runs.live(request.parent_id) if request.parent_id is not None else None
        parent_depth, depth = self._depths(request, parent)
        check_cap(depth, request.max_depth, agent=request.agent_type, parent_id=request.parent_id)
        entry = _Entry(
            new_run_id(),
            request,
            parent,
            parent_depth,
            depth,
            role,
            allowed,
            child=request.parent_id is not None,
        )
        if parent is None and request.parent_id is not None:
            # A parent stored but not running here: the ceiling it recorded for its children.
            entry.ceiling = self._stored_ceiling(request.parent_id, CEILING_BELOW_KEY)
        if ceiling is not None:
            entry.ceiling = ceiling if entry.ceiling is None else entry.ceiling.meet(ceiling)
        return await self._start(entry)

    async def resumed(self, run_id: str, message: str | None, *, caller: str | None) -> RunRecord:
        """Build and publish the stored run ``run_id`` again, continuing with ``message``
        (``None``: from its stored conversation alone, as a queue's worker drives a run).

        The returned record is published (listed, ``published`` event with ``resumed: true``,
        store status ``running`` or ``queued``) and not yet scheduled. See
        ``SubagentRuntime.resume``.
        """
        if not isinstance(run_id, str) or not run_id.strip():
            raise InvalidRequest(
                f"run_id must be a non-empty string, got {run_id!r}", field="run_id"
            )
        if message is not None and (not isinstance(message, str) or not message.strip()):
            raise InvalidRequest(
                "the message a resumed run continues with must be a non-empty string",
                field="message",
                run_id=run_id,
            )
        live = self._runs.live(run_id)
        if live is not None and not live.finished:
            raise InvalidRequest(
                f"run {run_id!r} is {live.status} in this runtime; steer it instead of resuming it",
                run_id=run_id,
                status=live.status,
            )
        provider = self._provider
        if provider.capabilities.resume is not True:
            raise UnsupportedCapability(
                f"provider {provider.name!r} cannot resume a run: it does not advertise the "
                "`resume` capability (continuing a stored conversation)",
                provider=provider.name,
                controls=["resume"],
                capabilities=provider.capabilities.to_dict(),
            )
        header = self._store.get_header(run_id)
        if header is None or (caller is not None and header.parent_id != caller):
            whose = "among your subagents" if caller is not None else "in the store"
            raise UnknownRun(f"no run {run_id!r} {whose} to resume", run_id=run_id)
        if message is None and header.status in END_STATES:
            # Read under the lease just claimed: whoever ended it let go of it first.
            raise InvalidRequest(
                f"run {run_id!r} has ended ({header.status}); there is nothing to continue",
                run_id=run_id,
                status=header.status,
            )
        stored_depth = check_depth(
            header.delegation_depth, what=f"stored delegation depth of {run_id!r}"
        )
        request = stored_request(header, _CONTINUED if message is None else message)
        parent = self._runs.live(header.parent_id) if header.parent_id is not None else None
        if parent is not None and parent.finished:
            parent = None
        parent_depth, depth = resumed_depths(self._store, header, parent, stored_depth)
        history = stored_history(self._store, header)
        role = self._roles(request.role)
        has_edge = header.parent_id is not None and has_running_edge(
            self._store, parent_id=header.parent_id, child_id=run_id
        )
        entry = _Entry(
            run_id, request, parent, parent_depth, depth, role, history=history, has_edge=has_edge
        )
        entry.continued = message is None
        entry.ceiling = self._stored_ceiling(run_id, CEILING_KEY)
        if parent is None and header.parent_id is not None:
            below = self._stored_ceiling(header.parent_id, CEILING_BELOW_KEY)
            if below is not None:
                entry.ceiling = below if entry.ceiling is None else entry.ceiling.meet(below)
        return await self._start(entry)

    def _stored_ceiling(self, run_id: str, key: str) -> Ceiling | None:
        """The ceiling the header of ``run_id`` recorded under ``key`` (``None``: no header,
        or one written before ceilings were recorded)."""
        header = self._store.get_header(run_id)
        if header is None or key not in header.meta:
            return None
        return Ceiling.from_json(header.meta[key], where=f"the header of {run_id!r} ({key})")

    # -- the one path ---------------------------------------------------------------------------

    async def _start(self, entry: _Entry) -> RunRecord:
        request, run_id = entry.request, entry.run_id
        self._catalog.reload()
        dispatch = self._dispatch(request.agent_type, entry.allowed, child=entry.child)
        context = self.parent_context(entry.parent, entry.parent_depth)
        memo_key: str | None = HOST if entry.parent is None else None
        if entry.ceiling is not None:
            held = context.ceiling.meet(entry.ceiling)
            if held != context.ceiling:
                context, memo_key = dataclasses.replace(context, ceiling=held), None
        deployment = self._deployment(dispatch.definition)
        authority = self._resolutions.resolve(
            dispatch.definition,
            _call(request),
            context,
            deployment,
            parent_key=memo_key,
            persona=UNSET if request.persona is None else request.persona,
            tool_filter=request.restriction,
            role=entry.role,
            depth=entry.depth,
        )
        ancestors, spending = self._spending(entry, dispatch.definition)
        worktree: Worktree | None = None
        built: list[ProviderChild] = []
        try:
            if entry.history is None:
                worktree = await self._worktree(run_id, authority)
            else:
                authority, context = _continuing(authority, context, entry)
            record = await self._builder.build(
                run_id,
                request,
                authority,
                context,
                depth=entry.depth,
                role=entry.role,
                worktree=worktree,
                built=built,
                resumed=entry.history is not None,
                continued=entry.continued,
                spending=spending,
                deployment=deployment,
            )
            if entry.history is None:
                # The ledgers in use (those the child's spending reports from), its ancestors'.
                drawn = ancestors if spending is None else spending.ledgers[: len(ancestors)]
                charge = (
                    partial(self._budgets.charge_child, drawn, run_id)
                    if request.parent_id is not None
                    else None
                )
                self._publisher.publish(
                    record, authority=authority, request=request, note=dispatch.note, charge=charge
                )
            else:
                record.has_edge = entry.has_edge
                self._publisher.republish(record, parent=entry.parent, messages=len(entry.history))
        except BaseException:
            with anyio.CancelScope(shield=True):
                if spending is not None:
                    spending.close()
                for child in built:
                    await discard_child(child)
                if worktree is not None and self._worktrees is not None:
                    await anyio.to_thread.run_sync(
                        partial(self._worktrees.finish, worktree, success=False)
                    )
            raise
        return record

    def _spending(
        self, entry: _Entry, definition: AgentDefinition
    ) -> tuple[tuple[Ledger, ...], RunSpending | None]:
        """The ledgers a child draws on (DESIGN rule 12): its ancestors' and, when it has a
        budget, its own. A fresh child is checked against its ancestors' ``children`` (refused
        with ``BudgetExceeded`` past it) and counted when it is published; a resumed one reads
        its own stored ledger, never a new one, so nothing is reset."""
        request, budgets = entry.request, self._budgets
        parent = entry.parent
        if parent is not None and parent.spending is not None:
            ancestors = parent.spending.ledgers
        elif parent is not None:
            ancestors = ()
        else:
            ancestors = budgets.ancestors(request.parent_id)
        own: Ledger | None
        if entry.history is not None:
            own = budgets.ledger(entry.run_id)
        else:
            budgets_given = (
                Budget.parse(request.budget) if request.budget is not None else None,
                None if definition.budget is UNSET else definition.budget,
                self._settings.budget if request.parent_id is None else None,
            )
            if budgets_given == (None, None, None):
                own = None  # nothing limits it: no ledger of its own
            else:
                limit = tighter(*budgets_given)
                own = None if limit is None else Ledger(entry.run_id, limit)
            if request.parent_id is not None:
                budgets.check_child(ancestors, entry.run_id)
        ledgers = (*ancestors, own) if own is not None else ancestors
        return ancestors, budgets.spending(entry.run_id, ledgers) if ledgers else None

    def _dispatch(
        self, agent_type: str, allowed: tuple[str, ...] | None, *, child: bool
    ) -> DispatchLike:
        """``catalog.dispatch``, bounded by ``allowed``: the definition that would really run
        (after any fallback) must be allowed, and a refusal names only allowed agents."""
        catalog = self._catalog
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
        """The parent's depth and the child's; the host's child is at depth 0."""
        parent_id = request.parent_id
        if parent_id is None:
            return 0, 0
        header = self._store.get_header(parent_id)
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
        """What a child of ``parent`` (``None``: the host) inherits from it: tools, live views
        of them, prompt, model, transcript, permission mode, cwd, skills."""
        if parent is None:
            registry = self._registry
            tools = registry.tools()
            host = self._host
            if host is not None and host.tools is tools:
                return host  # frozen, and nothing else in it changes in the runtime's life
            # The host sits above depth 0; the child's own depth is passed to ``resolve``.
            host = self._host = ParentContext(
                tools=tools,
                cwd=None if self._project is None else str(self._project),
                permission_mode=self._settings.permission_mode,
                ceiling=Ceiling.from_settings(self._settings.permission_mode),
                live=registry.tools,
                live_stamp=lambda: registry.version,
            )
            return host
        scope = parent.child.scope

        def live() -> Mapping[str, Tool]:
            return {tool.name: tool for tool in scope.view().tools()}

        return ParentContext(
            tools=live(),
            system_prompt=parent.system,
            model=parent.model,
            transcript=tuple(parent.child.messages()),
            permission_mode=parent.permission_mode,
            depth=parent_depth,
            cwd=parent.cwd,
            live=live,
            live_stamp=lambda: scope.view().key,
            skills=parent.skills,
            call_gate=scope.call_gate,
            ceiling=parent.ceiling,
        )

    async def _worktree(self, run_id: str, authority: EffectiveAuthority) -> Worktree | None:
        if authority.checkout.kind != "worktree":
            return None
        manager = self._worktrees
        if manager is None:
            raise WorktreeUnavailable(
                f"{authority.definition.name!r} asks for isolation: worktree, but this runtime "
                "has no project (or worktrees are disabled in settings); nothing was started",
                run_id=run_id,
            )
        return await anyio.to_thread.run_sync(manager.create, run_id)


def _continuing(
    authority: EffectiveAuthority, context: ParentContext, entry: _Entry
) -> tuple[EffectiveAuthority, ParentContext]:
    """A resumed run's authority and context: no worktree (it ended with the run's first
    life), no inherited-context prefix (the history holds the first task), and its own
    stored conversation as the transcript it continues."""
    if authority.checkout.kind == "worktree":
        raise WorktreeUnavailable(
            f"{authority.definition.name!r} runs in its own worktree, which ended with the "
            f"first run of {entry.run_id!r}; a worktree child cannot be resumed: start it again",
            run_id=entry.run_id,
        )
    assert entry.history is not None
    return (
        dataclasses.replace(authority, task_prefix=""),
        dataclasses.replace(context, transcript=entry.history),
    )


#: ``_call``'s answers by (call, background): requests with equal calls share one.
_FOLDED: dict[tuple[CallParams, bool], CallParams] = {}


#: ``_call``'s answers for a request with no call parameters, by ``background``.
_NO_CALL_FOLDED: Final = {
    background: dataclasses.replace(NO_CALL, run_in_background=background)
    for background in (False, True)
}


def _call(request: SubagentStartRequest) -> CallParams:
    """The call fields with ``background`` folded in (``validate_request`` ruled out a clash)."""
    call = request.call
    background = request.background
    if background is None or call.run_in_background is not UNSET:
        return call
    if call is NO_CALL:
        return _NO_CALL_FOLDED[background]  # the usual request: nothing to hash
    key = (call, background)
    try:
        folded = _FOLDED.get(key)
    except TypeError:  # a value in the call that cannot be hashed
        return dataclasses.replace(call, run_in_background=background)
    if folded is None:
        if len(_FOLDED) >= 256:
            _FOLDED.clear()
        folded = _FOLDED[key] = dataclasses.replace(call, run_in_background=background)
    return folded
