"""``SubagentRuntime``: starts, lists, waits for, steers and stops children through a provider.

The path of one start (DESIGN, "The path of one delegation"):

1. the capability gate: every control in the request must be one the provider advertises,
   before anything else happens (no run, event, store row or listing otherwise);
2. validation: the request's own fields, its tool filter against the live registry;
3. depth: the parent's depth is the larger of its durable header and this runtime's value; the
   child's is that + 1, rejected when it exceeds the request's cap;
4. ``catalog.reload()``, ``catalog.dispatch()``, ``resolve()``;
5. the worktree, when the resolved checkout asks for one (strict: no fallback);
6. ``provider.create(spec, setup)``: the child is built and composed while still private;
7. publication, in one store transaction (header, lineage edge, ``published`` event, the
   spawn receipt), then the listing and the event stream. Any failure before this point rolls
   everything back. Right before that transaction, in the same synchronous step, the start is
   refused (``InvalidRequest``) when the runtime is closing or the parent has ended or is
   stopping, so no child is ever published that nobody would stop.

Runs live in the runtime's task group (``async with SubagentRuntime(...) as runtime``); closing
the runtime stops every child. A child ends when its parent ends.

The parts, each built here with its collaborators passed in: ``start`` (``StartPath``) is the
one build path with two entries, a fresh start (steps 3-7) and a resumed stored run (``resume``
reads what the store says of it); ``build`` builds a child (step 6) and ``publish`` publishes
it (step 7); ``runs`` (``LiveRuns``) is the one owner of the live runs, which durable/ reads
through ``membrane.durable.runs.RunsTable``; ``durable.receipts`` makes a start with a
``request_id`` idempotent (DESIGN rule 8); ``scheduler`` owns the task groups, the closing
gate and stops, with ``slots`` bounding the background runs (``settings.max_concurrency``) and
lending a waiting parent's slot; ``finish`` drives each run to
its end; ``durable.outbox`` delivers background children's completion notices to their parents
durably. This class is the facade over them.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Awaitable, Callable, Collection, Sequence
from functools import partial
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Literal, TypeVar

import anyio

from membrane.agents.definition import AgentDefinition
from membrane.agents.dispatch import DEFAULT_FALLBACK, startable
from membrane.agents.skills import preload_texts
from membrane.config.model_names import resolve_spec
from membrane.config.values import Settings
from membrane.durable.messages import Delivery, Messenger
from membrane.durable.outbox import OutboxDrainer
from membrane.durable.receipts import SpawnReceipts
from membrane.durable.runs import RunInfo, RunResult
from membrane.durable.sweeper import Sweeper
from membrane.durable.transcripts import emitter, turn_barriers
from membrane.errors import (
    InvalidRequest,
    MembraneError,
    StoreError,
    UnknownRun,
    UnsupportedCapability,
)
from membrane.extensions.hooks import ExtensionHooks
from membrane.json_types import JSONDict, JSONObject
from membrane.limits import check_count, check_seconds
from membrane.loop.calls import Emit
from membrane.models.base import Model
from membrane.models.prices import Prices
from membrane.resolve.authority import Deployment
from membrane.resolve.ceiling import Ceiling
from membrane.resolve.roles import RoleRestriction
from membrane.runtime.budget import Budgets
from membrane.runtime.build import ChildBuilder
from membrane.runtime.delegation import DelegationConfig
from membrane.runtime.events import EventHub, EventStream
from membrane.runtime.finish import Finisher
from membrane.runtime.options import RuntimeOptions, checked_parts
from membrane.runtime.persona import check_persona
from membrane.runtime.provider import (
    Provider,
    check_capabilities,
)
from membrane.runtime.providers.in_process import InProcessProvider
from membrane.runtime.publish import Publisher
from membrane.runtime.questions import Questions
from membrane.runtime.request import SubagentStartRequest, allowed_agent_names, validate_request
from membrane.runtime.runs import OWNER_KEY, LiveRuns, RunRecord
from membrane.runtime.scheduler import Scheduler
from membrane.runtime.start import CatalogLike, StartPath
from membrane.runtime.workflows import WorkflowBinder
from membrane.runtime.workspace import Workspace
from membrane.runtime.worktree import WorktreeManager, WorktreeOutcome
from membrane.sandbox import WRITING_TOOLS
from membrane.store.base import SessionHeader, Store
from membrane.store.memory import MemoryStore
from membrane.store.select import chosen_state
from membrane.tools.registry import ToolRegistry
from membrane.tools.spec import ToolContext
from membrane.tools.view import ToolView
from membrane.vocabulary import END_STATES

__all__ = ["CatalogLike", "SubagentRuntime"]

T = TypeVar("T")

#: When a start returns: once its publication is durable, or once it is committed.
Acknowledge = Literal["durable", "commit"]

#: ``runs()`` with no ``limit``: more than any store holds.
_ALL = 2**62


class SubagentRuntime:
    """Children of one deployment, on one provider, with durable headers in ``store``.

    ``SubagentRuntime.open(project, model=...)`` builds one for a project folder in one call.
    Built by hand, it takes the catalog, the live registry, the provider, a store (default: in
    memory) and ``options`` (``RuntimeOptions``: settings, project, deployment, worktrees,
    delegation, the setup observer, memory). The delegation config is checked against the
    provider here, at mount, so a numeric cap on a provider without ``depth_limit`` fails now,
    not at a start.
    """

    @classmethod
    def open(
        cls,
        project: Path,
        *,
        model: Model | None = None,
        provider: Provider | None = None,
        state: Path | str | None = None,
        workspace: Path | None = None,
        home: Path | None = None,
    ) -> SubagentRuntime:
        """A runtime for the project folder ``project``, as ``membrane run`` builds it: its
        settings, catalog, built-in tools, extensions (their hooks bound to the children that
        load them), skills, memory, and its durable store (``state`` overrides where it lives: a
        file, or a ``postgresql://`` URL; the runtime closes the store it opened when it
        closes). Children run on ``provider``, or in this process on ``model``; give one of
        them. Use it as
        ``async with SubagentRuntime.open(project, model=model) as runtime:``. It mounts no MCP
        servers (``membrane run`` does). When the settings say ``provider = "dbos"``, give
        neither: the children go on the queue and ``membrane worker`` drives them, on the
        workers' model (docs/scale.md).
        """
        if model is not None and provider is not None:
            raise InvalidRequest(
                "SubagentRuntime.open needs a model or a provider (exactly one of them)",
                field="model",
            )
        ws = Workspace.open(Path(project), workspace=workspace, home=home)
        queued = provider is None and model is None and ws.settings.provider == "dbos"
        if provider is None and model is None and not queued:
            raise InvalidRequest(
                "SubagentRuntime.open needs a model or a provider (exactly one of them), "
                "unless the settings say provider = 'dbos'",
                field="model",
            )
        store = ws.open_store(state)
        options = RuntimeOptions()
        if queued:
            from membrane.runtime.providers.dbos import on_queue

            where = chosen_state(state, settings_url=ws.settings.state_url) or ws.state.path
            queue = on_queue(store, where, queue=ws.settings.queue_name)
            provider, options = queue, RuntimeOptions(handoff=queue.handoff)
        if provider is None:
            assert model is not None
            hooks = ExtensionHooks.from_extensions(ws.extensions.values())
            provider = InProcessProvider(model, hooks=hooks)
        runtime = cls.on_workspace(ws, provider, store=store, options=options)
        runtime._owned_store = store
        return runtime

    @classmethod
    def on_workspace(
        cls,
        ws: Workspace,
        provider: Provider,
        *,
        store: Store,
        options: RuntimeOptions | None = None,
    ) -> SubagentRuntime:
        """A runtime over the opened project ``ws``, as ``open``, ``membrane run`` and
        ``membrane mcp serve`` build it: the workspace's catalog, registry, settings, project,
        deployment and memory; ``options`` adds the rest (workflows, an approver, ...)."""
        return cls(
            catalog=ws.catalog,
            registry=ws.registry,
            provider=provider,
            store=store,
            options=dataclasses.replace(
                options or RuntimeOptions(),
                settings=ws.settings,
                project=ws.project,
                deployment=ws.deployment(),
                memory=ws.memory_for,
            ),
        )

    def __init__(
        self,
        *,
        catalog: CatalogLike,
        registry: ToolRegistry,
        provider: Provider,
        store: Store | None = None,
        options: RuntimeOptions | None = None,
    ) -> None:
        options = checked_parts(options, registry=registry, provider=provider)
        settings, project, deployment = options.settings, options.project, options.deployment
        worktrees, delegation = options.worktrees, options.delegation
        on_setup_step, memory = options.on_setup_step, options.memory
        child_env = options.child_env
        self._tracer = options.tracer
        self._on_end = options.on_end
        found = getattr(catalog, "settings", None)
        settings = settings or (found if isinstance(found, Settings) else Settings())
        if settings.persona is not None:
            check_persona(settings.persona, where="settings.persona")
        limit = settings.max_concurrency
        self._delegation = delegation or DelegationConfig.from_settings(settings)
        if not isinstance(self._delegation, DelegationConfig):
            raise InvalidRequest("delegation must be a DelegationConfig", field="delegation")
        self._delegation.check_provider(provider)
        self._delegation.check_registry(registry)
        self.settings = dataclasses.replace(settings, max_depth=self._delegation.max_depth)
        self.registry = registry
        self.provider = provider
        self.project = Path(project).resolve() if project is not None else None
        self.store: Store = store if store is not None else MemoryStore()
        if worktrees is None and self.project is not None and settings.worktrees_enabled:
            worktrees = WorktreeManager(self.project)
        self._worktrees = worktrees
        #: What ``prune_orphans()`` did when the runtime opened (worktrees of crashed runs).
        self.pruned_worktrees: tuple[WorktreeOutcome, ...] = ()
        self._catalog = catalog
        #: ``allowed_subagents`` -> (the catalog snapshot it was computed on, ``startable``).
        self._startable: dict[tuple[str, ...], tuple[object, tuple[str, ...]]] = {}
        self._memory = memory
        base = deployment or Deployment(settings=self.settings)
        project_text = str(self.project) if self.project is not None else base.project
        self._deployment = dataclasses.replace(base, settings=self.settings, project=project_text)
        self._deployment_last: Deployment | None = None
        self._hub = EventHub(self.store)
        self._runs = LiveRuns(self._hub)
        self._scheduler = Scheduler(
            self.store,
            hub=self._hub,
            runs=self._runs,
            limit=limit,
            foreground_limit=settings.max_foreground_children,
            drive=lambda record: self._finisher.drive(record),
        )
        self._slots = self._scheduler.slots
        self._outbox = OutboxDrainer(
            self.store,
            runs=self._runs,
            commit=self._hub.commit,
            max_attempts=settings.outbox_max_attempts,
            stop=self._scheduler.stop_run,
        )
        self._sweeper = Sweeper.from_settings(
            self.store,
            self.settings,
            leased=lambda: [
                r.run_id for r in self._runs.records() if not r.finished and not r.queued
            ],
            lost=self._scheduler.stop_run,
            outbox=self._outbox,
            commit=self._hub.commit,
            handoff=options.handoff,
        )
        self._messenger = Messenger(
            self.store,
            owner=self._sweeper.owner,
            commit=self._hub.commit,
            deliver=self._outbox.deliver,
            offer=self._outbox.offer_item,
        )
        self._questions = Questions(
            self.store,
            runs=self._runs,
            outbox=self._outbox,
            commit=self._hub.commit,
            emit=self._emitter,
            post=self._hub.post,
        )
        self._outbox.answer = self._questions.apply
        self._finisher = Finisher(
            self.store,
            hub=self._hub,
            outbox=self._outbox,
            worktrees=worktrees,
            live=self._runs.live,
            stop=self._scheduler.request_stop,
            release=self._slots.release,
            forget=self._ended,
            leases=self._sweeper.leases,
        )
        self._receipts = SpawnReceipts(
            self.store, hub=self._hub, live=self._live_info, owner=self._sweeper.owner
        )
        self._budgets = Budgets(
            self.store,
            commit=self._hub.commit,
            errors=self._hub.errors,
            prices=Prices(self.settings.models),
        )
        #: The store ``open()`` opened, closed with the runtime.
        self._owned_store: Store | None = None
        builder = ChildBuilder(
            provider,
            registry=registry,
            settings=self.settings,
            project=self.project,
            delegation=self._delegation,
            host=self,
            emitter=self._emitter,
            deployment=self._deployment_now,
            on_step=on_setup_step,
            child_env=child_env,
            workflows=WorkflowBinder(options.workflows, self.store, self._hub.commit),
            approver=options.approver,
            barrier=turn_barriers(store=self.store, runs=self._runs),
            questions=self._questions,
        )
        publisher = Publisher(
            self.store,
            hub=self._hub,
            runs=self._runs,
            settings=self.settings,
            gate=self._scheduler.check_publishable,
            must_queue=self._slots.must_queue,
            leases=self._sweeper.leases,
        )
        self._starts = StartPath(
            store=self.store,
            registry=registry,
            catalog=catalog,
            provider=provider,
            settings=self.settings,
            project=self.project,
            worktrees=worktrees,
            runs=self._runs,
            builder=builder,
            publisher=publisher,
            deployment=self._deployment_now,
            roles=self.role_restriction,
            gate=self._scheduler.check_publishable,
            budgets=self._budgets,
        )

    # -- lifetime -----------------------------------------------------------------------------

    async def __aenter__(self) -> SubagentRuntime:
        self._scheduler.check_unopened()
        if self._worktrees is not None:
            pruned = await anyio.to_thread.run_sync(self._worktrees.prune_orphans)
            self.pruned_worktrees = tuple(pruned)
        services = [self._hub.writer, self._outbox.run, self._sweeper.run]
        if self._tracer is not None:
            self._tracer.lookup = self._tool_arguments
            self._tracer.results = self._tool_result
            self._tracer.resolve = partial(
                resolve_spec, models=self.settings.models, aliases=self.settings.model_aliases
            )
            self._tracer.arguments |= self.settings.trace_tool_arguments
            services.append(partial(self._tracer.follow, self._hub.subscribe()))
        await self._scheduler.open(services)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if not self._scheduler.opened:
            self._scheduler.closing = True
            return None
        try:
            return await self._scheduler.close(exc_type, exc, tb, shutdown=self._shutdown)
        finally:
            if self._owned_store is not None:
                self._owned_store.close()

    def _shutdown(self) -> None:
        self._sweeper.stop()
        self._outbox.close()
        self._hub.close()

    # -- the public API -----------------------------------------------------------------------

    def startable(self, allowed: Collection[str]) -> tuple[str, ...]:
        """The agents an ``allowed_subagents`` list admits that the catalog can start by name
        now (reloaded first): what a parent's ``Task`` offers as its ``agent`` enum."""
        self._catalog.reload()
        definitions = self._catalog.definitions()
        key = tuple(allowed)
        known = self._startable.get(key)
        # A catalog hands out the same snapshot until something changes: asked at every view
        # of every delegating child, the answer is computed once per change.
        if known is not None and known[0] is definitions:
            return known[1]
        policy = self.settings.fallback_subagent
        fallback: str | None = DEFAULT_FALLBACK if policy is None else policy
        if policy is not None and policy.strip().lower() == "none":
            fallback = None  # fails closed
        names = startable(definitions, allowed, fallback=fallback)
        if len(self._startable) >= 256:
            self._startable.clear()
        self._startable[key] = (definitions, names)
        return names

    async def start(
        self,
        request: SubagentStartRequest,
        *,
        allowed_agents: Collection[str] | None = None,
        ceiling: Ceiling | None = None,
        acknowledge: Acknowledge = "durable",
    ) -> RunInfo:
        """Start one child; returns once it is published (running, or queued for a slot).

        ``allowed_agents``, when given, bounds the *dispatched* definition (an
        ``allowed_subagents`` list, case-insensitive, ``*`` for any): a type the catalog would
        resolve to a fallback outside it is refused, and the refusal names only these agents.
        ``ceiling``, when given, holds the child under it besides its parent's (DESIGN rule
        13): what a host that starts runs on an agent's behalf passes (``membrane mcp serve
        --agent``: the served agent's ceiling for the runs its ``Task`` starts).
        With ``request.request_id`` the start is idempotent (see the module docstring).

        ``acknowledge``: ``"durable"`` (the default) returns once the publication is durable
        (``Store.barrier``); ``"commit"`` returns once it is committed, and the child awaits
        the barrier itself before it runs, so its first model request never precedes a durable
        publication (docs/durability.md says what each survives).

        Raises, with nothing published: ``UnsupportedCapability``, ``InvalidRequest``,
        ``InvalidPersona``, ``InvalidDepth``, ``EmptyToolFilter``, ``UnknownToolInFilter``,
        ``UnknownRun`` (no such parent), ``DepthLimitExceeded``, ``UnknownSubagent``,
        ``WorktreeUnavailable``, ``SetupFailed`` or ``StoreError``; and ``ChildFailed`` for a
        replayed foreground start whose run was interrupted (see ``membrane.durable.receipts``).
        """
        launch = self._launcher(acknowledge)
        role, allowed = self._admit(request, allowed_agents)
        return await self._start_admitted(
            request, role=role, allowed=allowed, ceiling=ceiling, launch=launch
        )

    async def start_many(
        self,
        requests: Sequence[SubagentStartRequest],
        *,
        allowed_agents: Collection[str] | None = None,
        ceiling: Ceiling | None = None,
        acknowledge: Acknowledge = "durable",
    ) -> list[RunInfo]:
        """Start a batch of children, one after another, behind one durability barrier.

        Each start is published and committed in turn; the children are launched together
        once the whole batch has committed. With ``acknowledge="durable"`` (the default), one
        ``Store.barrier()`` first makes every publication of the batch durable, and this
        returns after it: one sync for the whole batch under ``synchronous=full``. With
        ``"commit"`` it returns at once and every child awaits the barrier before it runs.
        A ``request_id`` keeps each start idempotent, as in ``start``.

        Every request is checked first (its type, the provider's capabilities, its fields):
        a bad one fails the batch with nothing published. A start that fails later (an unknown
        subagent, the depth cap...) ends the batch there: the error raised carries the run ids
        of the children the batch had already started in ``data["started"]``, and those are
        launched (and, acknowledged ``"durable"``, made durable) before it is raised.
        """
        self._launcher(acknowledge)  # refuses an unknown value before anything starts
        durable = acknowledge == "durable"
        admitted = [(request, *self._admit(request, allowed_agents)) for request in requests]
        # The batch's children are launched together once every start has committed: a child
        # launched mid-batch would ask for a sync of its own while the batch still commits.
        held: list[RunRecord] = []

        async def hold(record: RunRecord) -> RunInfo:
            held.append(record)
            return self._info(record)

        started: list[RunInfo] = []
        try:
            for request, role, allowed in admitted:
                started.append(
                    await self._start_admitted(
                        request, role=role, allowed=allowed, ceiling=ceiling, launch=hold
                    )
                )
        except MembraneError as exc:
            run_ids = [info.run_id for info in started]
            exc.data["started"] = run_ids
            exc.started = run_ids  # type: ignore[attr-defined]
            raise
        finally:
            synced = False
            try:
                if durable and held:
                    await self.store.barrier()
                    synced = True
            finally:
                for record in held:
                    # Unsynced (acknowledged at commit, or the barrier failed): each child
                    # awaits the barrier itself before it runs.
                    record.unsynced = not synced
                    self._launch_now(record)
        launched = {record.run_id: record for record in held}
        return [
            self._info(launched[info.run_id]) if info.run_id in launched else info
            for info in started
        ]

    def _launcher(self, acknowledge: object) -> Callable[[RunRecord], Awaitable[RunInfo]]:
        """The launch that ``acknowledge`` names (``InvalidRequest`` for anything else)."""
        if acknowledge == "durable":
            return self._launch_durable
        if acknowledge == "commit":
            return self._launch_committed
        raise InvalidRequest(
            f"acknowledge must be 'durable' or 'commit', got {acknowledge!r}", field="acknowledge"
        )

    def _admit(
        self, request: SubagentStartRequest, allowed_agents: Collection[str] | None
    ) -> tuple[RoleRestriction | None, tuple[str, ...] | None]:
        """The checks of a start that need no action: the request's type, the provider's
        capabilities, an open runtime, the request's fields. Returns its role restriction and
        the agent names it may dispatch to."""
        if not isinstance(request, SubagentStartRequest):
            raise InvalidRequest(
                f"start() takes a SubagentStartRequest, got {type(request).__name__}"
            )
        allowed = allowed_agent_names(allowed_agents)
        role = self.role_restriction(request.role)
        check_capabilities(request, self.provider, role_filters=role is not None)
        self._scheduler.require_open()
        validate_request(request, registry=self.registry)
        return role, allowed

    async def _start_admitted(
        self,
        request: SubagentStartRequest,
        *,
        role: RoleRestriction | None,
        allowed: tuple[str, ...] | None,
        ceiling: Ceiling | None,
        launch: Callable[[RunRecord], Awaitable[RunInfo]],
    ) -> RunInfo:
        """Build, publish and launch one admitted request (through its receipt, with a
        ``request_id``)."""

        async def act() -> RunInfo:
            return await launch(
                await self._starts.fresh(request, role=role, allowed=allowed, ceiling=ceiling)
            )

        if request.request_id is None:
            return await act()
        return await self._receipts.start(request.request_id, act)

    async def run(self, request: SubagentStartRequest) -> RunResult:
        """``start()`` and ``wait()`` in one call."""
        info = await self.start(request)
        if info.result is not None and self._runs.live(info.run_id) is None:
            return info.result  # a replayed start whose run ended in an earlier process
        return await self.wait(info.run_id)

    async def wait(self, run_id: str, *, caller: str | None = None) -> RunResult:
        """The run's result, once it has ended. ``caller``: only its own children are known;
        it is the run that waits, and it lends its concurrency slot while it does. A run that
        ended and left memory answers from the store (its result without its messages)."""
        record = self._find(run_id, caller)
        if isinstance(record, RunInfo):
            assert record.result is not None
            return record.result
        if caller is None:
            await record.done.wait()  # a host's wait: it holds no slot to lend
        else:
            record.parent_waits += 1
            try:
                async with self._slots.lending(caller):
                    await record.done.wait()
            finally:
                record.parent_waits -= 1
        assert record.result is not None
        if caller is not None:
            self._outbox.settled_by_wait(record)
        await self.store.barrier()
        return record.result

    async def wait_all(
        self, run_ids: Sequence[str], *, timeout: float | None = None, caller: str | None = None
    ) -> builtins.list[RunInfo]:
        """Wait until every run has ended or ``timeout`` seconds pass; return their states.

        Cancelling or timing out the wait leaves the runs running.
        """
        if isinstance(run_ids, str) or not isinstance(run_ids, Sequence) or not run_ids:
            raise InvalidRequest("run_ids must be a non-empty list of run ids", field="ids")
        timeout = check_seconds(timeout, what="timeout")
        found = [self._find(run_id, caller) for run_id in dict.fromkeys(run_ids)]
        records = [record for record in found if isinstance(record, RunRecord)]
        parent_wait = int(caller is not None)
        for record in records:
            record.parent_waits += parent_wait
        try:
            async with self._slots.lending(caller):
                with anyio.move_on_after(timeout):
                    await self._until_settled(records)
        finally:
            for record in records:
                record.parent_waits -= parent_wait
        if caller is not None:
            for record in records:
                if record.finished:
                    self._outbox.settled_by_wait(record)
        await self.store.barrier()
        return [item if isinstance(item, RunInfo) else self._info(item) for item in found]

    async def _until_settled(self, records: builtins.list[RunRecord]) -> None:
        """Until every run of ``records`` has ended, or one still running asks its parent a
        question (``AskParent``): the wait returns it, for the parent to answer."""
        while True:
            pending = [record for record in records if not record.delivered]
            if not pending or any(record.question is not None for record in pending):
                return
            asked = self._questions.asked
            async with anyio.create_task_group() as group:

                async def first(event: anyio.Event, scope: anyio.CancelScope) -> None:
                    await event.wait()
                    scope.cancel()

                group.start_soon(first, pending[0].done, group.cancel_scope)
                group.start_soon(first, asked, group.cancel_scope)

    def runs(
        self,
        *,
        parent_id: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> builtins.list[RunInfo]:
        """The runs this runtime published (started, or resumed here), or only ``parent_id``'s
        children, in the order the store first recorded them: up to ``limit`` of them (all
        when ``None``), from just after run ``after`` (a page's last ``run_id``). Live runs
        are listed as they are now; ended ones as the store holds them.

        Raises ``InvalidRequest`` for a ``limit`` below 1 or an ``after`` that is not a
        string, ``UnknownRun`` for an ``after`` the store does not hold."""
        check_count(limit, what="limit", minimum=1, optional=True)
        if after is not None and not isinstance(after, str):
            raise InvalidRequest("after must be a run id (a string)", field="after")
        if parent_id is not None and not isinstance(parent_id, str):
            raise InvalidRequest("parent_id must be a run id (a string)", field="parent_id")
        try:
            headers = self.store.page_sessions(
                limit=_ALL if limit is None else limit,
                after=after,
                parent_id=parent_id,
                meta=(OWNER_KEY, self._runs.owner),
            )
        except StoreError:
            if after is not None and self.store.get_header(after) is None:
                raise UnknownRun(f"no run {after!r} to list after", run_id=after) from None
            raise
        listed: builtins.list[RunInfo] = []
        for header in headers:
            record = self._runs.live(header.session_id)
            listed.append(RunInfo.from_header(header) if record is None else self._info(record))
        return listed

    def busy(self) -> bool:
        """Whether a run of this runtime has not ended yet."""
        return self._runs.running()

    def get(self, run_id: str, *, caller: str | None = None) -> RunInfo:
        """The run as it is now (``UnknownRun``: none of this runtime's, or not ``caller``'s
        child); one that ended and left memory as the store holds it."""
        found = self._find(run_id, caller)
        return found if isinstance(found, RunInfo) else self._info(found)

    def steer(
        self, run_id: str, message: str, *, caller: str | None = None,
        request_id: str | None = None,
    ) -> Delivery | None:  # fmt: skip
        """Inject ``message`` into a running child after its current tool call.

        With ``request_id`` it is durable instead: a ``brief``, see ``message``."""
        if request_id is not None:
            return self.message(run_id, message, request_id=request_id, caller=caller, kind="brief")
        record = self._find(run_id, caller)
        if isinstance(record, RunInfo) or record.finished:
            raise InvalidRequest(f"run {run_id!r} has ended; only a live child can be steered")
        if not record.child.steer(message):
            raise UnsupportedCapability(
                f"provider {record.provider!r} cannot steer a running child",
                provider=record.provider,
            )
        return None

    def message(
        self, run_id: str, text: str, *, request_id: str | None = None,
        caller: str | None = None, kind: str | None = None,
    ) -> Delivery:  # fmt: skip
        """Send ``text`` (``kind``: ``ping``, ``brief`` or ``answer``) to a run live here or
        stored, once per ``request_id`` (``membrane.durable.messages``); ``caller``: only to
        its own children. Without ``kind``, a run whose ``AskParent`` question is open gets
        ``text`` as its answer, any other a ``ping``; ``answer`` to a run with no open
        question is ``NoOpenQuestion``. Committed on return; under ``full``, power-safe once
        ``store.barrier()`` returns."""
        self._scheduler.require_open()
        self._recipient(run_id, caller)
        sender = caller or "host"
        if kind is None:
            kind = "ping" if self._questions.open(run_id) is None else "answer"
        if kind == "answer":
            payload = self._questions.answer_payload(
                run_id, text, sender=sender, request_id=request_id
            )
            delivery = self._messenger.answer(run_id, payload, request_id=request_id)
            if not delivery.replayed:
                header = self.store.get_header(run_id)
                self._questions.sent(
                    run_id,
                    payload,
                    parent_id=None if header is None else header.parent_id,
                    agent="" if header is None else header.agent,
                )
            return delivery
        return self._messenger.message(
            run_id, text, request_id=request_id, sender=sender, kind=kind
        )

    def question(self, run_id: str, *, caller: str | None = None) -> JSONDict | None:
        """``run_id``'s open ``AskParent`` question, ``{"id", "text", ...}``, or ``None``."""
        self._recipient(run_id, caller)
        return self._questions.open(run_id)

    def _recipient(self, run_id: str, caller: str | None) -> None:
        """Refuse a run that is neither live here nor stored (or not ``caller``'s child)."""
        header = None if self._runs.live(run_id) else self.store.get_header(str(run_id))
        if header is None or (caller is not None and header.parent_id != caller):
            self._lookup(run_id, caller)

    async def stop(
        self, run_id: str, *, caller: str | None = None, request_id: str | None = None
    ) -> RunInfo:
        """Stop a run and its descendants; returns once it has ended. With ``request_id`` the
        stop is a ``cancel`` delivery with its receipt (acted on once per ``request_id``)."""
        record = self._find(run_id, caller)
        if request_id is not None:
            self._messenger.cancel(run_id, request_id=request_id, sender=caller or "host")
        if isinstance(record, RunInfo):
            return record  # it ended and left memory
        self._scheduler.request_stop(record)
        async with self._slots.lending(caller):
            await record.done.wait()
        await self.store.barrier()
        return self._info(record)

    @property
    def sweeper(self) -> Sweeper:
        """Leases, receipt reaping and the reconcile of interrupted runs (``durable.sweeper``)."""
        return self._sweeper

    @property
    def outbox(self) -> OutboxDrainer:
        """The completion notices owed to parents (``outbox.pending(run_id)``) and their drainer."""
        return self._outbox

    def events(self) -> EventStream:
        """Lifecycle events published from now on (``async for event in runtime.events()``)."""
        return self._hub.subscribe()

    def view(self, run_id: str) -> ToolView:
        """The tool view a run resolves right now: exactly what it may see and call."""
        return self._lookup(run_id, None).child.scope.view()

    def call_context(self, run_id: str) -> ToolContext:
        """The context of a call made for a live run from outside its loop (its ``Bash``
        reaching the machine runtime with its token): the run's checkout, its read-only flag
        (no ``Write`` or ``Edit`` in its view now), its network grant and its environment,
        as its own tool calls get them."""
        record = self._lookup(run_id, None)
        return ToolContext(
            agent=record.agent,
            run_id=run_id,
            cwd=None if record.cwd is None else Path(record.cwd),
            read_only=WRITING_TOOLS.isdisjoint(record.child.scope.view().visible),
            session=run_id,
            env=MappingProxyType(dict(record.env)),
            network=record.network,
            read_paths=record.read_paths,
        )

    def role_restriction(self, role: str | None) -> RoleRestriction | None:
        """The restriction of a trusted role from ``settings.roles`` (``None``: no role)."""
        if role is None:
            return None
        spec = self.settings.roles.get(role) if isinstance(role, str) else None
        if spec is None:
            known = ", ".join(sorted(self.settings.roles)) or "none configured"
            raise InvalidRequest(
                f"unknown role {role!r}; roles in settings: {known}", field="role", role=role
            )
        return RoleRestriction(role, spec)

    @property
    def delegation(self) -> DelegationConfig:
        """What the delegation tools copy into each request."""
        return self._delegation

    def _deployment_now(self, definition: AgentDefinition | None = None) -> Deployment:
        """The deployment as of now: the live registry, the catalog's definitions and, for
        ``definition``, its memory and the instructions of the skills it preloads."""
        memory = (
            self._memory(definition)
            if self._memory is not None and definition is not None
            else self._deployment.memory
        )
        texts = (
            preload_texts(definition, self._deployment.skill_files)
            if definition is not None
            else {}
        )
        tools, subagents = self.registry.tools(), self._catalog.definitions()
        last = self._deployment_last
        if (
            last is not None
            and last.registry_tools is tools
            and last.subagents is subagents
            and last.memory == memory
            and last.skill_texts == texts
        ):
            return last  # nothing changed: the same (frozen) deployment, shared
        last = self._deployment_last = dataclasses.replace(
            self._deployment,
            registry_tools=tools,
            subagents=subagents,
            memory=memory,
            skill_texts=texts,
        )
        return last

    def _emitter(self, run_id: str) -> Emit:
        """The ``emit`` callback of one child; silent until the child is published."""
        return emitter(run_id, hub=self._hub, store=self.store, runs=self._runs)

    async def _launch_committed(self, record: RunRecord) -> RunInfo:
        """Launch a published ``record`` at once; its task awaits ``Store.barrier`` before the
        child runs (``RunRecord.unsynced``), so nothing it does precedes a durable start."""
        record.unsynced = True
        self._launch_now(record)
        return self._info(record)

    def _launch_now(self, record: RunRecord) -> None:
        """Bind a published ``record``'s budget and schedule it."""
        if record.spending is not None:
            record.spending.bind(partial(self._end_over_budget, record))
        self._scheduler.launch(record)

    async def _launch_durable(self, record: RunRecord) -> RunInfo:
        """Launch a published ``record`` once its publication is durable (``Store.barrier``);
        a barrier cancelled or failed still launches it: it is published."""
        try:
            await self.store.barrier()
        finally:
            if record.spending is not None:
                record.spending.bind(partial(self._end_over_budget, record))
            self._scheduler.launch(record)
        return self._info(record)

    def _tool_arguments(self, run_id: str, call_id: str) -> JSONObject | None:
        """The arguments of tool call ``call_id`` of run ``run_id``: from its live
        conversation, or from its stored transcript once it has ended and left memory."""
        if self._runs.live(run_id) is not None:
            return self._runs.tool_arguments(run_id, call_id)
        for message in self._stored_backwards(run_id):
            calls = message.get("tool_calls")
            for call in calls if isinstance(calls, list) else ():
                if isinstance(call, dict) and call.get("id") == call_id:
                    arguments = call.get("arguments")
                    return arguments if isinstance(arguments, dict) else None
        return None

    def _tool_result(self, run_id: str, call_id: str) -> str | None:
        """The text of tool call ``call_id``'s result in run ``run_id``: from its live
        conversation, or from its stored transcript once it has ended and left memory."""
        if self._runs.live(run_id) is not None:
            return self._runs.tool_result(run_id, call_id)
        for message in self._stored_backwards(run_id):
            if message.get("role") == "tool" and message.get("tool_call_id") == call_id:
                content = message.get("content")
                return content if isinstance(content, str) else None
        return None

    def _stored_backwards(self, run_id: str) -> list[JSONDict]:
        """Run ``run_id``'s stored messages, newest first (none when the store cannot say)."""
        try:
            return list(reversed(self.store.transcript(run_id)))
        except StoreError:
            return []

    def _ended(self, record: RunRecord) -> None:
        """``record`` ended and its end is delivered: it leaves memory when nothing here can
        ask for it any more (``LiveRuns.ended``), and the host hears of it (``on_end``)."""
        self._runs.ended(record)
        if self._on_end is not None:
            self._on_end(record.run_id)

    def _end_over_budget(self, record: RunRecord, error: MembraneError) -> None:
        """End ``record`` with ``error``: another run spent what it needed (DESIGN rule 12)."""
        if record.finished or record.ended_by is not None:
            return
        record.ended_by = error
        self._scheduler.request_stop(record)

    def _lookup(self, run_id: str, caller: str | None) -> RunRecord:
        record = self._runs.live(run_id)
        if record is None or (caller is not None and record.parent_id != caller):
            whose = "among your subagents" if caller is not None else "in this runtime"
            raise UnknownRun(f"no run {run_id!r} {whose}", run_id=str(run_id))
        return record

    def _find(self, run_id: str, caller: str | None) -> RunRecord | RunInfo:
        """The live record of a run of this runtime, or, for one that ended and left memory,
        what the store holds of it; ``UnknownRun`` as ``_lookup``."""
        if self._runs.live(run_id) is None and isinstance(run_id, str):
            header = self.store.get_header(run_id)
            if (
                header is not None
                and (self._runs.owns(header) or self._queued_here(header))
                and header.status in END_STATES
                and header.result is not None
                and (caller is None or header.parent_id == caller)
            ):
                return RunInfo.from_header(header)
        return self._lookup(run_id, caller)

    def _queued_here(self, header: SessionHeader) -> bool:
        """A run this runtime's queued provider published, which a worker then drove (and so
        became its owner in the header)."""
        return self.provider.capabilities.queued and header.provider == self.provider.name

    def _info(self, record: RunRecord) -> RunInfo:
        return record.info(queue_position=self._slots.position(record))

    def _live_info(self, run_id: str) -> RunInfo | None:
        record = self._runs.live(run_id)
        return None if record is None else self._info(record)

    async def resume(self, run_id: str, message: str, *, caller: str | None = None) -> RunInfo:
        """Restart the stored run ``run_id`` (ended, or left ``running`` by a crashed process)
        under the same id, continuing its stored conversation with ``message``, then with the
        completion notices still owed to it (``membrane.durable.outbox``).

        Its durable depth is restored, never lowered; its definition is dispatched and resolved
        again and its scope gets the restrictions of a fresh start; a parent not live here
        leaves it running as its own root (``parent_id`` and depth kept). ``caller``: only its
        own children. Raises ``InvalidRequest`` (a live run, or nothing stored to continue),
        ``UnknownRun``, ``InvalidDepth`` (a malformed stored depth), ``UnsupportedCapability``
        (a provider that cannot continue a conversation), ``UnknownSubagent``, ``SetupFailed``,
        ``WorktreeUnavailable`` or ``StoreError``; nothing is published then.
        """
        return await self._resume(run_id, message, caller=caller)

    async def take(self, run_id: str) -> RunInfo:
        """Drive the stored run ``run_id`` here from its stored conversation, with no new
        message: what ``membrane worker`` does with a run it took from the queue. The run
        must not have ended; otherwise as ``resume`` (``RunLeased`` while another process
        holds its lease)."""
        return await self._resume(run_id, None, caller=None)

    async def _resume(self, run_id: str, message: str | None, *, caller: str | None) -> RunInfo:
        self._scheduler.require_open()
        live = self._runs.live(run_id) if isinstance(run_id, str) else None
        held = not isinstance(run_id, str) or (live is not None and not live.finished)
        with self._sweeper.leases.claimed(run_id, held=held) as lease:  # RunLeased: elsewhere
            record = await self._starts.resumed(run_id, message, caller=caller)
        record.lease = lease
        info = await self._launch_durable(record)
        self._outbox.resumed(record)
        return info
