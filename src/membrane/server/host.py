"""``ProjectHost``: one project served by the machine runtime, and each caller's one view of it.

A host owns one ``Workspace`` (catalog, settings, extensions, registry), its MCP servers
(mounted on the registry, started when a child asks for them), its store and one
``SubagentRuntime``. Every caller reaches the project's tools through exactly one
``ToolView`` and its ``call`` (the same path in-process children use), so validation, role
access, rate limits and the handler run in one place:

* a token caller's view *is* its run's view (``runtime.view(run_id)``): what its ``Bash`` can
  do through the socket is exactly what the run could do as a tool call;
* any other caller's view is a scope over the project's registry with the caller's role
  installed as a restriction (``runtime.role_restriction``), and, for a standalone session
  (a session id but no run), the spawn tools denied.

Runs started here run in process, on the model the starting request names: the host names it
for the start (or the resume) and the provider keeps it for the run, whose children run on it
too (``ProjectHost.adopt``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

import anyio
from anyio.abc import TaskStatus

from membrane.config.budget import Budget
from membrane.config.model_names import resolve_spec
from membrane.config.values import DEFAULT_ROLE, Settings
from membrane.durable.schedule_actions import schedule_tools
from membrane.durable.schedules import ScheduleBook, ScheduleRunner
from membrane.errors import (
    CallerRefused,
    InvalidRequest,
    StoreError,
    TokenInvalid,
    UnknownModel,
    UnknownRun,
)
from membrane.extensions.hooks import ExtensionHooks
from membrane.json_types import JSONObject
from membrane.mcp.mount import McpServers
from membrane.models.base import Model
from membrane.models.wire_log import REQUESTS_FOLDER
from membrane.resolve.ceiling import Ceiling, mode_rank
from membrane.runtime import (
    InProcessProvider,
    ProviderChild,
    RunInfo,
    RuntimeOptions,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.runtime.listing import RunRow, list_runs, subtree
from membrane.runtime.provider import ChildSpec, SetupCallback
from membrane.runtime.workspace import UntrustedPlace
from membrane.sandbox import WRITING_TOOLS
from membrane.server.approval import socket_approver
from membrane.server.identity import Caller, TokenBook
from membrane.store.base import PruneReport
from membrane.store.location import project_id as project_id_of
from membrane.store.select import StateTarget, chosen_state
from membrane.tools.restriction import Restriction
from membrane.tools.scope import Scope
from membrane.tools.spec import ToolContext
from membrane.tools.view import ToolView
from membrane.vocabulary import DELEGATION_TOOLS, END_STATES
from membrane.workflow.planning import builtin_workflows
from membrane.workspace import Workspace

__all__ = ["ModelFactory", "ProjectHost", "project_id_of"]


class ModelFactory(Protocol):
    """Builds the model a ``model`` spec names (``None``: the settings' ``default_model``);
    ``requests``: the folder its request log goes to, ``None`` for none."""

    def __call__(
        self, spec: str | None, settings: Settings, /, *, requests: Path | None = None
    ) -> Model: ...


#: How often, at least, a host looks for due schedules (seconds).
SCHEDULE_POLL = 30.0
#: Sessions (scope and call context) a host keeps for callers without a run (then it starts
#: over).
_SESSIONS = 1024


class _ModelRouter:
    """In process, on the model of the run's tree: the one its top-level start or resume named
    (``ProjectHost.start``, ``resume``), else its parent's (``ProjectHost.adopt``)."""

    name = "in-process:spawn"
    capabilities = InProcessProvider.capabilities

    def __init__(self, host: ProjectHost, hooks: ExtensionHooks) -> None:
        self._host = host
        self._hooks = hooks

    async def create(self, request: ChildSpec, setup: SetupCallback) -> ProviderChild:
        model = self._host.adopt(request)
        return await InProcessProvider(model, hooks=self._hooks).create(request, setup)


class _Session:
    """What a caller without a run calls through: its scope, its context, and the scope's view
    as of the versions it was taken at (``current``)."""

    __slots__ = ("_at", "_view", "context", "scope")

    def __init__(self, scope: Scope, context: ToolContext) -> None:
        self.scope = scope
        self.context = context
        self._view: ToolView | None = None
        self._at: tuple[int, int, int] | None = None

    def current(self) -> ToolView:
        """The scope's view now. The host's caller scopes hold only predicates whose stamps
        never move (a role's restriction, the standalone ``Restriction``), so the view is
        current while the registry's, the scope's and the requirements' versions are those it
        was taken at; any move asks the scope again."""
        registry = self.scope.registry
        at = (registry.version, self.scope.version, registry.requirements.version)
        view = self._view
        if view is None or at != self._at:
            view = self._view = self.scope.view()
            self._at = at
        return view


class ProjectHost:
    """One project: its workspace, store and runtime, opened by ``run`` in the server's group."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        tokens: TokenBook,
        models: ModelFactory,
        child_env: Mapping[str, str],
        untrusted: UntrustedPlace | None = None,
    ) -> None:
        self.workspace = workspace
        self.project_id = project_id_of(workspace.project)
        self._tokens = tokens
        self._models = models
        self._base_env = dict(child_env)
        self._untrusted = untrusted
        #: The checkout of each run started here (``checkouts``: the live ones).
        self._checkouts: dict[str, Path] = {}
        self._roles: dict[str, str | None] = {}
        #: The model each live run runs on; its children run on it too.
        self._run_models: dict[str, Model] = {}
        #: The model each top-level start names, while ``runtime.start`` runs (by the identity
        #: of its request, which the runtime hands the provider in ``ChildSpec.request``).
        self._starting: dict[int, Model] = {}
        #: The model of each (spec, logged) the starts named, with the settings it was built on.
        self._built: dict[tuple[str | None, bool], tuple[object, Model]] = {}
        self._scopes: dict[tuple[str, bool], Scope] = {}
        #: The scope and call context of each caller without a run (``_session``).
        self._sessions: dict[tuple[str | None, str | None], _Session] = {}
        #: The call context of each token caller's run (``context``).
        self._contexts: dict[str, ToolContext] = {}
        #: What the last retention pass deleted, and the error of the last that failed.
        self.pruned: PruneReport | None = None
        self.prune_error: StoreError | None = None
        self._stop = anyio.Event()
        self._done = anyio.Event()
        self._changed = anyio.Event()
        workspace.registry.subscribe(self._on_change)
        workspace.registry.requirements.subscribe(self._on_change)
        self.store = workspace.open_store()
        self._schedules_changed = anyio.Event()
        self.schedules = ScheduleBook(self.store, on_change=self._wake_schedules)
        for tool in schedule_tools(self.schedules, role_of=self._role_of):
            workspace.registry.register(tool, replace=True)
        hooks = ExtensionHooks.from_extensions(workspace.extensions.values())
        self._hooks = hooks
        # Built as ``open``, ``membrane run`` and ``membrane mcp serve`` build theirs; the
        # options add what only the server has (each run's token, the socket's approver).
        self.runtime = SubagentRuntime.on_workspace(
            workspace,
            _ModelRouter(self, hooks),
            store=self.store,
            options=RuntimeOptions(
                child_env=self._child_env,
                workflows=builtin_workflows(),
                approver=socket_approver,
                on_end=self._forget_run,
            ),
        )

    # -- lifetime -----------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold the runtime open until ``close``; closing stops every run of the project."""
        try:
            async with (
                McpServers.of(self.workspace, untrusted=self._untrusted) as servers,
                self.runtime,
                anyio.create_task_group() as group,
            ):
                # The project's MCP servers, mounted as a run mounts them: each started when a
                # child that names it starts, or at the first call of one of its tools.
                servers.hooks(self.workspace.catalog.definitions, into=self._hooks)
                group.start_soon(self._fire_schedules)
                if self.workspace.settings.retention.enabled:
                    group.start_soon(self._prune)
                task_status.started()
                await self._stop.wait()
                group.cancel_scope.cancel()
        finally:
            self.store.close()
            self._done.set()

    async def close(self) -> None:
        self._stop.set()
        await self._done.wait()

    async def _prune(self) -> None:
        """Retention (``[retention]``): delete the finished runs it lets go of, at start and
        then every ``interval_seconds``, in a worker thread (the store's lock serialises it
        with the runs' own writes). A failure is kept for the next pass to retry."""
        retention = self.workspace.settings.retention
        while True:
            try:
                self.pruned = await anyio.to_thread.run_sync(self.store.prune, retention)
            except StoreError as exc:
                self.prune_error = exc
            await anyio.sleep(retention.interval_seconds)

    async def _fire_schedules(self) -> None:
        """Fire this project's due schedules (the definitions' own ``schedule:`` fields
        included) until the host closes: at start, then at each next due time, at least every
        ``SCHEDULE_POLL`` seconds (a schedule another process added is seen then)."""
        self.schedules.sync_definitions(self.workspace.catalog.definitions())
        runner = ScheduleRunner(self.schedules, self._start_scheduled)
        while True:
            await runner.tick()
            wake = runner.next_wake()
            delay = SCHEDULE_POLL if wake is None else min(SCHEDULE_POLL, wake - time.time())
            with anyio.move_on_after(max(delay, 0.05)):
                await self._schedules_changed.wait()
            self._schedules_changed = anyio.Event()

    def _wake_schedules(self) -> None:
        self._schedules_changed.set()

    async def _start_scheduled(
        self, agent: str, task: str, request_id: str, role: str | None
    ) -> str:
        request = SubagentStartRequest(agent, task, request_id=request_id, role=role)
        return (await self._start_on(self._model(None, log_requests=False), request)).run_id

    async def _start_on(
        self, model: Model, request: SubagentStartRequest, ceiling: Ceiling | None = None
    ) -> RunInfo:
        """``runtime.start(request)`` with its run's tree on ``model`` (and held under
        ``ceiling``, a mode the caller asked for)."""
        self._starting[id(request)] = model
        try:
            return await self.runtime.start(request, ceiling=ceiling)
        finally:
            del self._starting[id(request)]

    def adopt(self, spec: ChildSpec) -> Model:
        """The model ``spec``'s run runs on, kept with its role for the calls its token makes:
        its start's, a resume's, or its parent's."""
        model = (
            self._starting.get(id(spec.request))
            or self._run_models.get(spec.run_id)
            or (self._run_models.get(spec.parent_id) if spec.parent_id is not None else None)
        )
        if model is None:
            raise InvalidRequest("no model reached this run; runs/start names one in `model`")
        self._run_models[spec.run_id] = model
        self._roles.setdefault(spec.run_id, spec.request.role)
        return model

    def _role_of(self, context: ToolContext) -> str | None:
        if context.run_id is not None:
            return self._roles.get(context.run_id)
        role = context.extra.get("role")
        return role if isinstance(role, str) else None

    def _on_change(self, change: object) -> None:
        event, self._changed = self._changed, anyio.Event()
        event.set()

    async def changed(self) -> None:
        """Return at the next change of the project's registry (a caller's view may move)."""
        await self._changed.wait()

    def busy(self) -> bool:
        """Whether any run of this project is live."""
        return self.runtime.busy()

    # -- identity -----------------------------------------------------------------------------

    def checkouts(self) -> list[Path]:
        """The checkouts of this project's live runs (what their children may write)."""
        live: list[Path] = []
        for run_id, checkout in list(self._checkouts.items()):
            try:
                ended = self.runtime.get(run_id).status in END_STATES
            except UnknownRun:
                ended = True
            if ended:
                del self._checkouts[run_id]
            else:
                live.append(checkout)
        return live

    def _forget_run(self, run_id: str) -> None:
        """Drop what this host kept for a run that has ended (a resume adds it again)."""
        self._checkouts.pop(run_id, None)
        self._roles.pop(run_id, None)
        self._run_models.pop(run_id, None)
        self._contexts.pop(run_id, None)

    def _child_env(self, run_id: str, cwd: Path | None) -> Mapping[str, str]:
        self._checkouts[run_id] = cwd if cwd is not None else self.workspace.project
        return {
            **self._base_env,
            "MEMBRANE_TOKEN": self._tokens.mint(self.project_id, run_id),
            "MEMBRANE_RUN_ID": run_id,
            "MEMBRANE_SESSION_ID": run_id,
            "MEMBRANE_PROJECT": str(self.workspace.project),
        }

    def bind(self, run_id: str, claimed: JSONObject) -> Caller:
        """The caller a token of ``run_id`` establishes (the role its run was started with);
        ``TokenInvalid`` once the run ended."""
        try:
            info = self.runtime.get(run_id)
        except UnknownRun:
            raise TokenInvalid("the run of this MEMBRANE_TOKEN is not live here") from None
        if info.status in END_STATES:
            raise TokenInvalid(f"the run of this MEMBRANE_TOKEN has ended ({info.status})")
        return Caller(
            role=self._roles.get(run_id),
            session_id=run_id,
            run_id=run_id,
            project_id=self.project_id,
            claimed=dict(claimed),
        )

    def check_live(self, caller: Caller) -> None:
        """Refuse a token caller whose run has ended since it connected."""
        if caller.run_id is not None:
            self.bind(caller.run_id, caller.claimed)

    # -- the one view -------------------------------------------------------------------------

    def view(self, caller: Caller) -> ToolView:
        """The caller's one view of this project's tools (see the module docstring)."""
        if caller.run_id is not None:
            self.check_live(caller)
            return self.runtime.view(caller.run_id)
        return self._scope(caller).view()

    def _scope(self, caller: Caller) -> Scope:
        """The scope over the registry of a caller without a run: its role's restriction, and
        for a standalone session the spawn tools denied (one per role and kind of session)."""
        key = (caller.role or "", caller.standalone)
        scope = self._scopes.get(key)
        if scope is None:
            scope = Scope(self.workspace.registry, name=f"caller:{caller.role}")
            role = self.runtime.role_restriction(caller.role) if caller.role else None
            if role is not None:
                scope.restrict(role, validate=False)
            if caller.standalone:
                scope.restrict(
                    Restriction(deny=DELEGATION_TOOLS, label="standalone session"),
                    validate=False,
                )
            self._scopes[key] = scope
        return scope

    def context(self, caller: Caller, view: ToolView | None = None) -> ToolContext:
        """The call context of ``caller``. A token caller's is its run's own
        (``SubagentRuntime.call_context``: its checkout, its read-only flag, its network grant
        and its environment, its ``MEMBRANE_TOKEN`` included), built once per run and kept
        while the run's read-only flag is what ``view`` (its view now) says: the token is
        minted once, not on every call. Whether the run is still live is checked on every
        call all the same (``view``), so a cached context never outlives its run's token."""
        run_id = caller.run_id
        if run_id is None:
            return self._session(caller).context
        if view is None:
            view = self.view(caller)
        read_only = WRITING_TOOLS.isdisjoint(view.visible)
        found = self._contexts.get(run_id)
        if found is None or found.read_only != read_only:
            if len(self._contexts) >= _SESSIONS:
                self._contexts.clear()
            found = self.runtime.call_context(run_id)
            if found.cwd is None:
                found = ToolContext(
                    agent=found.agent,
                    run_id=run_id,
                    cwd=self.workspace.project,
                    read_only=found.read_only,
                    session=run_id,
                    env=found.env,
                    network=found.network,
                    read_paths=found.read_paths,
                )
            self._contexts[run_id] = found
        return found

    def _session(self, caller: Caller) -> _Session:
        """The scope, call context and current view of a caller without a run, by (role,
        session): the scope and context are the same on every call (the context immutable,
        its ``extra`` read-only), so each ``actions/call`` finds them with one lookup."""
        key = (caller.role, caller.session_id)
        found = self._sessions.get(key)
        if found is None:
            if len(self._sessions) >= _SESSIONS:
                self._sessions.clear()
            context = ToolContext(
                agent=f"caller:{caller.role}",
                cwd=self.workspace.project,
                # A caller that proves nothing shares its role's windows, whatever session it
                # names: a new name per connection escapes no rate limit.
                session=(caller.session_id if caller.owner else None) or f"role:{caller.role}",
                # The owner's sessions are its own names: past the limiter's table they share
                # one window, so a new name per call escapes no rate limit either.
                rate_shared="owner" if caller.owner else None,
                extra=MappingProxyType({"role": caller.role}),
                checkout_reads_only=caller.role == DEFAULT_ROLE,
            )
            found = self._sessions[key] = _Session(self._scope(caller), context)
        return found

    def call(self, caller: Caller, name: str, arguments: JSONObject) -> Awaitable[object]:
        """Call ``name`` through the caller's one view (``ToolView.call``: awaited by the
        caller, with no coroutine of the host's own in between)."""
        if caller.run_id is None:
            session = self._session(caller)
            return session.current().call(name, arguments, session.context)
        view = self.view(caller)
        return view.call(name, arguments, self.context(caller, view))

    # -- runs ---------------------------------------------------------------------------------

    async def start(
        self,
        caller: Caller,
        request: SubagentStartRequest,
        *,
        model: str | None,
        exact: bool = False,
        log_requests: bool = False,
        permission_mode: str | None = None,
    ) -> RunInfo:
        """Start a run for ``caller``: the same path as its ``Task`` call.

        ``permission_mode`` (``runs/start``'s ``permissionMode``, ``membrane run
        --permission-mode``) holds the run and its whole tree at that mode at most: it may only
        narrow what the settings' ``permission_mode`` allows (``caller-refused`` otherwise), and
        a run's own token may not set one (its starts run under its own mode).

        A token caller starts a child of its own run through its view's ``Task`` (so its
        ``allowed_subagents``, depth and role hold); any other caller starts a top-level run
        with its role installed on the child's scope. A standalone session has no spawn tools
        and may not start runs either.
        """
        ceiling = self._mode_ceiling(caller, permission_mode)
        if caller.run_id is not None:
            arguments: dict[str, object] = {"agent": request.agent_type, "task": request.task}
            if request.request_id is not None:
                arguments["request_id"] = request.request_id
            if request.background is not None:
                arguments["background"] = request.background
            if request.budget is not None:
                arguments["budget"] = Budget.parse(request.budget).to_dict()
            result = await self.call(caller, "Task", arguments)  # type: ignore[arg-type]
            run_id = result.get("run_id") if isinstance(result, dict) else None
            return self.runtime.get(str(run_id), caller=caller.run_id)
        if caller.standalone:
            self.view(caller).get("Task")  # tool-not-visible, as the spawn tools are hidden
        if exact:
            # A top-level run started by name (``membrane run``): no fallback dispatch.
            self.workspace.catalog.require(request.agent_type)
        return await self._start_on(self._model(model, log_requests=log_requests), request, ceiling)

    def _mode_ceiling(self, caller: Caller, mode: str | None) -> Ceiling | None:
        """The ceiling a requested permission mode sets, once checked against the settings."""
        if mode is None:
            return None
        if caller.run_id is not None:
            raise CallerRefused(
                "a run's token cannot set a permission mode: the runs it starts are held to "
                "its own",
                field="permissionMode",
            )
        allowed = self.workspace.settings.permission_mode
        if mode_rank(mode) > mode_rank(allowed):
            raise CallerRefused(
                f"permission mode {mode!r} would widen past the settings' {allowed!r}: a "
                "mode may only narrow (plan < dontAsk < default < acceptEdits < "
                "bypassPermissions)",
                field="permissionMode",
                mode=mode,
                allowed=allowed,
            )
        return Ceiling(mode=mode, mode_source="request:permissionMode")

    @property
    def state_path(self) -> Path:
        return self.workspace.state_path

    @property
    def state(self) -> StateTarget:
        """Where the project's runs are stored: the database ``MEMBRANE_STATE_URL`` or the
        settings' ``state_url`` names, else the project's file."""
        chosen = chosen_state(None, settings_url=self.workspace.settings.state_url)
        return self.state_path if chosen is None else chosen

    def _model(self, spec: str | None, *, log_requests: bool) -> Model:
        """The model ``spec`` names. Its requests are logged beside the state when the start
        asked for it or the settings say ``log_requests = true`` (only then is the factory
        given ``requests``, so a factory that takes two arguments still serves the rest)."""
        settings = self.workspace.settings
        logged = log_requests or settings.log_requests
        # One model per spec and settings, shared by the runs started on it, as one process
        # shares its model: a model holds an SDK client and its connections, which a model per
        # start would leave behind at every run's end. A script replays from its first turn
        # for each model built, so a scripted start (a resume too) gets a model of its own.
        key = (spec, logged)
        found = self._built.get(key)
        if found is not None and found[0] is settings:
            return found[1]
        if logged:
            model = self._models(spec, settings, requests=self.state_path.parent / REQUESTS_FOLDER)
        else:
            model = self._models(spec, settings)
        if not _scripted(spec or settings.default_model, settings):
            if len(self._built) >= _SESSIONS and key not in self._built:
                self._built.clear()
            self._built[key] = (settings, model)
        return model

    async def stored_runs(self, caller: Caller) -> list[RunRow]:
        """The project's stored runs as ``membrane runs`` lists them; a token caller gets only
        its own run's descendants."""
        rows = await anyio.to_thread.run_sync(list_runs, self.state)
        return rows if caller.run_id is None else subtree(rows, caller.run_id)

    async def resume(
        self, caller: Caller, run_id: str, message: str, *, model: str | None
    ) -> RunInfo:
        self._run_models[run_id] = self._model(model, log_requests=False)
        self._roles[run_id] = caller.role
        return await self.runtime.resume(run_id, message, caller=caller.run_id)


def _scripted(spec: str | None, settings: Settings) -> bool:
    """Whether ``spec`` names a scripted model (or names nothing the settings resolve)."""
    if spec is None:
        return True
    try:
        choice = resolve_spec(spec, models=settings.models, aliases=settings.model_aliases)
    except UnknownModel:
        return True
    return choice.provider == "scripted"
