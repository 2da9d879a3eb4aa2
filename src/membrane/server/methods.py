"""The methods of the machine runtime, by name (the names are the contract; see docs/server.md).

Each handler takes the server, the connection and its validated params and returns a JSON
value. Params are checked here, at the wire, with pydantic (extra keys refused, types strict)
and turned into the runtime's own values right away; a mismatch is JSON-RPC ``invalid params``
(-32602) with the field's path. Every ``MembraneError`` raised below reaches the client as the
one server error (-32000) with its stable code in ``data.code``.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Hashable
from pathlib import Path
from typing import Any, Final, Literal, Protocol, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from membrane.config.budget import Budget
from membrane.errors import CallerRefused, InvalidRequest, TooManyWaits, UnknownRun
from membrane.json_types import JSONDict, JSONValue
from membrane.resolve import CallParams
from membrane.runtime import RunInfo, SubagentStartRequest
from membrane.runtime.events import TERMINAL_KINDS
from membrane.runtime.listing import RUNS_PAGE, RUNS_PAGE_MAX, page_rows, subtree
from membrane.server.approval import APPROVAL_CAPABILITY, answered_by, client_approver
from membrane.server.connection import InvalidParams, Peer, UnknownMethod
from membrane.server.framing import Encoded, Request, encode_value
from membrane.server.host import ProjectHost
from membrane.server.identity import Caller
from membrane.store.select import shown
from membrane.tools.rules import PERMISSION_MODES
from membrane.tools.spec import ToolOutput
from membrane.tools.view import wire_schema
from membrane.workflow.planning import PlanningControl

__all__ = ["METHODS", "Server", "dispatch", "plain"]


class _Replies(Protocol):
    async def once(self, key: Any, act: Callable[[], Awaitable[Encoded]]) -> Encoded: ...


class Server(Protocol):
    """What the methods need from the server that owns the connection."""

    @property
    def replies(self) -> _Replies: ...

    @property
    def approval_timeout(self) -> float: ...

    @property
    def max_waits_per_connection(self) -> int: ...

    def identify(
        self, identity: JSONDict, client: JSONDict, *, peer_uid: int | None = None
    ) -> Caller: ...

    def runtime_info(self, caller: Caller | None = None) -> JSONDict: ...

    async def add_project(self, root: Path, *, caller: Caller) -> ProjectHost: ...

    async def remove_project(self, project_id: str, *, caller: Caller) -> None: ...

    def project(self, project_id: str, caller: Caller) -> ProjectHost: ...

    def projects(self, caller: Caller) -> list[ProjectHost]: ...

    def watch_actions(
        self, conn: Peer, host: ProjectHost, caller: Caller, names: tuple[str, ...]
    ) -> None: ...

    def stop_for_build(self, caller: Caller, build: str) -> None: ...

    def stop_for_role(self, caller: Caller, requested: str) -> None: ...

    def check_live(self, caller: Caller) -> None: ...


P = TypeVar("P", bound=BaseModel)


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Initialize(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    clientInfo: dict[str, Any] | None = None
    identity: dict[str, Any] | None = None


class _Root(_Params):
    root: str = Field(min_length=1)


class _Project(_Params):
    projectId: str = Field(min_length=1)


class _Call(_Project):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    requestId: str | None = Field(default=None, min_length=1)


class _Start(_Project):
    agent: str = Field(min_length=1)
    task: str = Field(min_length=1)
    call: dict[str, Any] | None = None
    background: bool | None = None
    requestId: str | None = Field(default=None, min_length=1)
    model: str | None = Field(default=None, min_length=1)
    # Checked by ``Budget.parse`` (through the request) so that an error names the kind;
    # ``kind=N,...`` text (what ``membrane run --budget`` takes) is parsed here.
    budget: str | dict[str, Any] | None = None
    exact: bool = False
    # Argument rules for this run alone, read by the request (``invalid-request`` if bad).
    rules: list[dict[str, Any]] | None = None
    #: Log each model request of the run beside the project's state (``--log-requests``).
    logRequests: bool = False
    #: The session's permission mode, a ceiling on the whole tree that may only narrow the
    #: settings' (``membrane run --permission-mode``); any case.
    permissionMode: str | None = Field(default=None, min_length=1)


class _Shutdown(_Params):
    requestedRole: str | None = Field(default=None, min_length=1)
    #: The build of the command that asks: a runtime of another build stops when idle.
    buildHash: str | None = Field(default=None, min_length=1)


class _Runs(_Project):
    parentId: str | None = None
    stored: bool = False
    #: One page: at most ``limit`` runs, from just after run ``after`` (``next`` of the last).
    limit: int = Field(default=RUNS_PAGE, ge=1, le=RUNS_PAGE_MAX)
    after: str | None = Field(default=None, min_length=1)


class _Run(_Project):
    runId: str = Field(min_length=1)


class _Wait(_Run):
    timeout: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class _Message(_Run):
    message: str = Field(min_length=1)


class _Answer(_Run):
    answer: Literal[
        "approve", "accept_light_plan", "decline_light_plan", "waive", "decide_finishing"
    ]
    value: str | None = Field(default=None, min_length=1)


class _Resume(_Message):
    model: str | None = Field(default=None, min_length=1)


def _parse(model: type[P], params: JSONDict) -> P:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "params"
        raise InvalidParams(
            f"invalid params: {where}: {error['msg']}", {"code": "invalid-params", "field": where}
        ) from None


def _caller(server: Server, conn: Peer) -> Caller:
    """The connection's caller; a run's token is refused (``token-invalid``) on every method
    once its run has ended, also on a connection opened while it was live."""
    caller = conn.state.get("caller")
    if not isinstance(caller, Caller):
        raise InvalidRequest("call initialize first; it establishes who is calling")
    if caller.run_id is not None:
        server.check_live(caller)
    return caller


async def _initialize(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    p = _parse(_Initialize, params)
    caller = server.identify(p.identity or {}, p.clientInfo or {}, peer_uid=conn.peer_uid)
    conn.state["caller"] = caller
    capabilities = (p.model_extra or {}).get("capabilities")
    client_approver(conn, capabilities, timeout=server.approval_timeout)
    return {
        "runtimeInfo": server.runtime_info(caller),
        "capabilities": {"actions": {"listChanged": True}, APPROVAL_CAPABILITY: {"request": True}},
        "caller": caller.to_dict(),
    }


async def _projects_add(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    caller = _caller(server, conn)
    root = Path(_parse(_Root, params).root)
    host = await server.add_project(root, caller=caller)
    return {
        "projectId": host.project_id,
        "root": str(host.workspace.project),
        "warnings": list(host.workspace.warnings),
    }


async def _projects_list(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    caller = _caller(server, conn)
    _parse(_Params, params)
    return {
        "projects": [
            {"projectId": host.project_id, "root": str(host.workspace.project)}
            for host in server.projects(caller)
        ]
    }


async def _projects_remove(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    caller = _caller(server, conn)
    await server.remove_project(_parse(_Project, params).projectId, caller=caller)
    return {"removed": True}


async def _actions_list(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    caller = _caller(server, conn)
    host = server.project(_parse(_Project, params).projectId, caller)
    view = host.view(caller)
    server.watch_actions(conn, host, caller, view.names)
    actions: list[JSONValue] = []
    for tool in view.tools():
        wire = wire_schema(tool)
        actions.append(
            {
                "name": wire["name"],
                "description": wire["description"],
                "inputSchema": wire["input_schema"],
            }
        )
    return {"actions": actions}


_CALL_KEYS: Final = frozenset(_Call.model_fields)


def _call_params(params: JSONDict) -> tuple[str, str, dict[str, Any], str | None]:
    """``actions/call``'s ``(projectId, name, arguments, requestId)``. Params that are plainly
    well formed (the hot path) are taken as they are; any others go through ``_Call``, which
    accepts exactly these and names the problem of the rest."""
    if params.keys() <= _CALL_KEYS:
        project, name = params.get("projectId"), params.get("name")
        arguments, request_id = params.get("arguments", {}), params.get("requestId")
        if (
            type(project) is str
            and project
            and type(name) is str
            and name
            and type(arguments) is dict
            and (request_id is None or (type(request_id) is str and request_id))
        ):
            return project, name, arguments, request_id
    p = _parse(_Call, params)
    return p.projectId, p.name, p.arguments, p.requestId


#: ``{"result": null}``, the reply of a tool that returns nothing, encoded once.
_NO_RESULT: Final = Encoded(b'{"result":null}')


def _call_result(value: object) -> Encoded:
    """``{"result": plain(value)}``, encoded."""
    if value is None:
        return _NO_RESULT
    return Encoded(b'{"result":%b}' % encode_value(plain(value)))


async def _actions_call(server: Server, conn: Peer, params: JSONDict) -> Encoded:
    caller = _caller(server, conn)
    project_id, name, arguments, request_id = _call_params(params)
    host = server.project(project_id, caller)
    if request_id is None:
        return _call_result(await host.call(caller, name, arguments))

    async def act() -> Encoded:
        return _call_result(await host.call(caller, name, arguments))

    return await server.replies.once((host.project_id, _who(conn, caller), request_id), act)


def _who(conn: Peer, caller: Caller) -> Hashable:
    """Whose replies a ``requestId`` names: a run's (its token), the owner's session (under
    its role), or, for a caller that proves nothing, its own connection only: a reply is
    never replayed to another caller."""
    if caller.run_id is not None:
        return ("run", caller.run_id)
    if caller.owner:
        return ("owner", caller.role, caller.session_id)
    mine = conn.state.get("replies")
    if mine is None:
        mine = conn.state["replies"] = object()
    return ("connection", mine)


def _own_runs(conn: Peer, caller: Caller) -> set[str] | None:
    """The runs a caller that proves nothing (neither the owner nor a run's token) may reach:
    those it started on this connection, and their descendants as its event stream sees them
    published; ``None`` for any other caller (the runtime's own checks hold for a token)."""
    if caller.run_id is not None or caller.owner:
        return None
    runs = conn.state.get("runs")
    if not isinstance(runs, set):
        runs = conn.state["runs"] = set()
    return runs


def _reach(host: ProjectHost, conn: Peer, caller: Caller, run_id: str) -> None:
    """Refuse (``unknown-run``) a run the caller may not reach (``_own_runs``): a child that
    dropped its token neither reads, messages nor stops a sibling."""
    own = _own_runs(conn, caller)
    if own is None:
        return
    seen: str | None = run_id
    for _ in range(64):  # deeper than any depth cap
        if seen is None:
            break
        if seen in own:
            return
        try:
            seen = host.runtime.get(seen).parent_id
        except UnknownRun:
            break
    raise UnknownRun(f"no run {run_id!r} among the runs this connection started", run_id=run_id)


async def _runs_start(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    caller = _caller(server, conn)
    p = _parse(_Start, params)
    host = server.project(p.projectId, caller)
    request = SubagentStartRequest(
        agent_type=p.agent,
        task=p.task,
        call=CallParams.from_mapping(p.call or {}, where="runs/start call"),
        background=p.background,
        request_id=p.requestId,
        role=caller.role,
        budget=Budget.parse(p.budget, where="runs/start budget")
        if isinstance(p.budget, str)
        else p.budget,
        rules=p.rules,
    )
    mode = None if p.permissionMode is None else _mode(p.permissionMode)
    with answered_by(conn):
        info = await host.start(
            caller,
            request,
            model=p.model,
            exact=p.exact,
            log_requests=p.logRequests,
            permission_mode=mode,
        )
    own = _own_runs(conn, caller)
    if own is not None:
        own.add(info.run_id)
    return {"run": info.to_dict()}


def _mode(value: str) -> str:
    """A permission mode named in any case, or ``invalid-params``."""
    for mode in PERMISSION_MODES:
        if mode.lower() == value.strip().lower():
            return mode
    raise InvalidParams(
        f"invalid params: permissionMode: {value!r} is not one of {', '.join(PERMISSION_MODES)}",
        {"code": "invalid-params", "field": "permissionMode"},
    )


async def _runs_resume(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    caller = _caller(server, conn)
    p = _parse(_Resume, params)
    host = server.project(p.projectId, caller)
    own = _own_runs(conn, caller)
    if own is not None and p.runId not in own:
        raise UnknownRun(
            f"no run {p.runId!r} among the runs this connection started", run_id=p.runId
        )
    with answered_by(conn):
        info = await host.resume(caller, p.runId, p.message, model=p.model)
    return {"run": info.to_dict()}


async def _runs_list(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    caller = _caller(server, conn)
    p = _parse(_Runs, params)
    host = server.project(p.projectId, caller)
    own = _own_runs(conn, caller)
    if p.stored:
        rows = await host.stored_runs(caller)
        if own is not None:
            keep = own | {row.run_id for root in own for row in subtree(rows, root)}
            rows = [row for row in rows if row.run_id in keep]
        rows, following = page_rows(rows, limit=p.limit, after=p.after)
        return {
            "runs": [row.to_dict() for row in rows],
            "state": shown(host.state),
            "next": following,
        }
    parent = caller.run_id if caller.run_id is not None else p.parentId
    infos = host.runtime.runs(parent_id=parent, limit=p.limit, after=p.after)
    following = infos[-1].run_id if len(infos) == p.limit else None
    if own is not None:
        reached: list[RunInfo] = []
        for info in infos:
            try:
                _reach(host, conn, caller, info.run_id)
            except UnknownRun:
                continue
            reached.append(info)
        infos = reached
    return {"runs": [info.to_dict() for info in infos], "next": following}


async def _runs_get(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    caller = _caller(server, conn)
    p = _parse(_Run, params)
    host = server.project(p.projectId, caller)
    _reach(host, conn, caller, p.runId)
    return {"run": host.runtime.get(p.runId, caller=caller.run_id).to_dict()}


async def _runs_wait(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    caller = _caller(server, conn)
    p = _parse(_Wait, params)
    host = server.project(p.projectId, caller)
    _reach(host, conn, caller, p.runId)
    waits = int(str(conn.state.get("waits", 0)))
    limit = server.max_waits_per_connection
    if waits >= limit:
        raise TooManyWaits(
            f"this connection has {limit} runs/wait calls in flight, as many as the settings "
            "allow (server_max_waits_per_connection); wait for one to end, or use another "
            "connection",
            limit=limit,
        )
    conn.state["waits"] = waits + 1
    try:
        (info,) = await host.runtime.wait_all([p.runId], timeout=p.timeout, caller=caller.run_id)
    finally:
        conn.state["waits"] = int(str(conn.state["waits"])) - 1
    return {"run": info.to_dict()}


async def _runs_message(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    caller = _caller(server, conn)
    p = _parse(_Message, params)
    host = server.project(p.projectId, caller)
    _reach(host, conn, caller, p.runId)
    if host.runtime.question(p.runId, caller=caller.run_id) is not None:
        # A run waiting in ``AskParent``: the message is its answer, a durable delivery.
        host.runtime.message(p.runId, p.message, caller=caller.run_id, kind="answer")
    else:
        host.runtime.steer(p.runId, p.message, caller=caller.run_id)
    return {"run": host.runtime.get(p.runId, caller=caller.run_id).to_dict()}


async def _runs_stop(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    caller = _caller(server, conn)
    p = _parse(_Run, params)
    host = server.project(p.projectId, caller)
    _reach(host, conn, caller, p.runId)
    return {"run": (await host.runtime.stop(p.runId, caller=caller.run_id)).to_dict()}


def _planning(server: Server, conn: Peer, p: _Run) -> PlanningControl:
    """The planning gate of run ``p.runId``, for the owner only: no agent answers for its host
    (seed 002: approval comes from the host, not from an agent), neither with its run's token
    nor by connecting without it."""
    caller = _caller(server, conn)
    if caller.run_id is not None:
        raise CallerRefused("a run's token cannot read or answer a planning gate")
    if not caller.owner:
        raise CallerRefused(
            "only the owner reads or answers a planning gate (your own `membrane` command "
            "presents $MEMBRANE_HOME/owner.token)"
        )
    host = server.project(p.projectId, caller)
    if host.store.get_header(p.runId) is None:
        raise UnknownRun(f"no run {p.runId!r} in this project", run_id=p.runId)
    return PlanningControl(host.store)


async def _workflow_get(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    p = _parse(_Run, params)
    return {"workflow": plain(_planning(server, conn, p).state(p.runId).to_dict())}


async def _workflow_answer(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    p = _parse(_Answer, params)
    control = _planning(server, conn, p)
    if p.answer in ("waive", "decide_finishing"):
        if p.value is None:
            raise InvalidParams(
                f"invalid params: value: {p.answer} needs one",
                {"code": "invalid-params", "field": "value"},
            )
        answer = getattr(control, "waive" if p.answer == "waive" else "decide_finishing")
        state = answer(p.runId, p.value)
    else:
        plain_answers = {
            "approve": control.approve,
            "accept_light_plan": control.accept_light_plan,
            "decline_light_plan": control.decline_light_plan,
        }
        state = plain_answers[p.answer](p.runId)
    return {"workflow": plain(state.to_dict())}


async def _events_subscribe(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    """Stream the project's lifecycle events to this connection as ``events/event``.

    A token caller hears only its own run's subtree; a caller that proves nothing only the
    subtrees of the runs it started on this connection."""
    caller = _caller(server, conn)
    host = server.project(_parse(_Project, params).projectId, caller)
    stream = host.runtime.events()
    mine: set[str] | None = _own_runs(conn, caller) if caller.run_id is None else {caller.run_id}
    started = anyio.Event()

    async def forward() -> None:
        async with stream:
            started.set()
            async for event in stream:
                if mine is not None:
                    if event.kind == "published" and event.parent_id in mine:
                        mine.add(event.run_id)
                    if event.run_id not in mine:
                        continue
                await conn.notify(
                    "events/event", {"projectId": host.project_id, "event": event.to_dict()}
                )
                if event.run_id == caller.run_id and event.kind in TERMINAL_KINDS:
                    return

    conn.group.start_soon(forward)
    await started.wait()
    return {"subscribed": True}


async def _runtime_shutdown(server: Server, conn: Peer, params: JSONDict) -> JSONValue:
    """Stop an idle runtime so that a launcher can start one under ``requestedRole`` or of
    its own build (``buildHash``)."""
    caller = _caller(server, conn)
    p = _parse(_Shutdown, params)
    if p.buildHash is not None:
        server.stop_for_build(caller, p.buildHash)
    else:
        server.stop_for_role(caller, p.requestedRole or "")
    return {"stopping": True}


def plain(value: object) -> JSONValue:
    """A handler's return value as JSON (strings, numbers, lists, objects; others as text). A
    result with parts (an MCP tool's) is ``{text, structured, attachments}``, each attachment
    ``{mimeType, name, data}`` with ``data`` in base64."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, ToolOutput):
        attachments: list[JSONValue] = [
            {
                "mimeType": part.mime_type,
                "name": part.name,
                "data": base64.b64encode(part.data).decode("ascii"),
            }
            for part in value.attachments
        ]
        return {
            "text": value.text,
            "structured": plain(value.structured),
            "attachments": attachments,
        }
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return plain(to_dict())
    return str(value)


Handler = Callable[[Server, Peer, JSONDict], Awaitable[JSONValue | Encoded]]

METHODS: dict[str, Handler] = {
    "initialize": _initialize,
    "projects/add": _projects_add,
    "projects/list": _projects_list,
    "projects/remove": _projects_remove,
    "actions/list": _actions_list,
    "actions/call": _actions_call,
    "runs/start": _runs_start,
    "runs/resume": _runs_resume,
    "runs/list": _runs_list,
    "runs/get": _runs_get,
    "runs/wait": _runs_wait,
    "runs/message": _runs_message,
    "runs/stop": _runs_stop,
    "workflow/get": _workflow_get,
    "workflow/answer": _workflow_answer,
    "events/subscribe": _events_subscribe,
    "runtime/shutdown": _runtime_shutdown,
}


def dispatch(server: Server, conn: Peer, request: Request) -> Awaitable[JSONValue | Encoded]:
    """The handler of ``request.method``, called (``UnknownMethod`` when there is none): the
    connection awaits it directly, with no coroutine of the dispatch's own in between."""
    handler = METHODS.get(request.method)
    if handler is None:
        raise UnknownMethod(f"unknown method {request.method[:100]!r}")
    return handler(server, conn, request.params)
