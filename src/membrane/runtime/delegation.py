"""The delegation tools ``Task``, ``TaskWait``, ``TaskList``, ``TaskStop`` and ``TaskMessage``.

They are scope-local tools of one parent (a child whose definition sets ``allowed_subagents``),
bound to that parent's run id, so a parent sees and controls only its own children: any other
id is ``unknown-run``. ``Task`` copies the deployment's ``DelegationConfig`` into every request
it makes (seed 001: ``max_depth`` defaults to 3, a number or ``"provider-managed"``).

A rejected start (depth cap, unknown type, bad arguments) is raised as its ``MembraneError``;
the loop turns it into an error tool result carrying the code, and no child exists. A
foreground child that ends without completing (``error``, ``aborted``, ``stopped``) is raised
as ``ChildFailed``, with the child's text and error, so the parent reads a failed delegation
as a failure.

``allowed_subagents`` bounds what a parent may start, and it bounds the *dispatched*
definition, not only the requested name: a name that the catalog would resolve to its fallback
(unknown, disabled or ambiguous) is refused unless the fallback itself is allowed. Errors name
only the agents the parent may start, never the rest of the catalog, and never suggest tools the
parent cannot see.

Starts are idempotent (DESIGN rule 8): ``Task`` always sends a ``request_id``, scoped to the
parent, either the model's own or one derived from the call's canonical JSON input. A repeated
identical call therefore replays the first child instead of starting another; a different
``request_id`` forces a new child.
"""

from __future__ import annotations

import builtins
import hashlib
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from membrane.agents.definition import UNSET, Unset
from membrane.config.budget import BUDGET_KINDS
from membrane.config.values import Settings
from membrane.errors import (
    ChildFailed,
    InvalidRequest,
    ToolFilterError,
    UnknownSubagent,
    UnsupportedCapability,
)
from membrane.limits import PROVIDER_MANAGED, check_depth_cap
from membrane.resolve import CallParams
from membrane.runtime.persona import check_persona
from membrane.runtime.provider import Provider
from membrane.runtime.request import SubagentStartRequest
from membrane.tools.registry import ToolRegistry
from membrane.tools.restriction import Restriction
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext
from membrane.vocabulary import DELEGATION_TOOLS, MUTATING_DELEGATION_TOOLS, SPAWN_FIELDS

if TYPE_CHECKING:
    from membrane.durable.messages import Delivery
    from membrane.durable.runs import RunInfo, RunResult

__all__ = [
    "DelegationConfig",
    "DelegationHost",
    "agent_allowed",
    "delegation_tools",
    "derived_request_id",
    "follow_catalog",
    "not_allowed",
    "task_request_id",
    "task_schema",
]

#: What a ``Task`` call passes on as call parameters (``run_in_background`` it decides itself).
_CALL_KEYS: Final = tuple(field for field in SPAWN_FIELDS if field != "run_in_background")


@dataclass(frozen=True, slots=True)
class DelegationConfig:
    """What the delegation tool copies into every start request it creates.

    ``max_depth``: a non-negative integer, or ``"provider-managed"`` for no cap (the provider's
    deployment owns recursion). ``persona`` and ``tool_filter`` are the other two controls.
    """

    max_depth: int | Literal["provider-managed"] = 3
    persona: str | Unset | None = UNSET
    tool_filter: Restriction | None = None

    def __post_init__(self) -> None:
        check_depth_cap(self.max_depth, what="delegation max_depth")
        if self.persona is not UNSET and self.persona is not None:
            check_persona(self.persona, where="delegation persona")
        if self.tool_filter is not None and not isinstance(self.tool_filter, Restriction):
            raise InvalidRequest(
                "delegation tool_filter must be a Restriction, got "
                f"{type(self.tool_filter).__name__}",
                field="tool_filter",
            )

    @classmethod
    def from_settings(cls, settings: Settings) -> DelegationConfig:
        return cls(max_depth=settings.max_depth)

    @property
    def cap(self) -> int | None:
        """The numeric cap, or ``None`` when provider-managed."""
        return check_depth_cap(self.max_depth, what="delegation max_depth")

    def check_registry(self, registry: ToolRegistry) -> None:
        """Mount-time check: ``tool_filter`` must name global tools of ``registry``
        (``EmptyToolFilter`` / ``UnknownToolInFilter`` otherwise), so a misspelt filter fails
        when the runtime is built, not on a model's first ``Task`` call."""
        if self.tool_filter is not None:
            self.tool_filter.validate(registry)

    def check_provider(self, provider: Provider) -> None:
        """Mount-time check: every configured control must be one ``provider`` enforces."""
        caps = provider.capabilities
        problems = []
        if self.cap is not None and not caps.depth_limit:
            problems.append(
                f"max_depth = {self.cap} needs depth_limit; set max_depth = "
                f"{PROVIDER_MANAGED!r} to leave recursion to the provider's deployment"
            )
        if self.persona not in (UNSET, None) and not caps.persona:
            problems.append("persona needs a provider with persona support")
        if self.tool_filter is not None and not caps.tool_filter:
            problems.append("tool_filter needs a provider with tool_filter support")
        if problems:
            raise UnsupportedCapability(
                f"the delegation tool cannot be mounted on provider {provider.name!r}: "
                + "; ".join(problems),
                provider=provider.name,
                capabilities=caps.to_dict(),
            )


class DelegationHost(Protocol):
    """What the tools need from the runtime; every call is scoped to ``caller``."""

    async def start(
        self, request: SubagentStartRequest, *, allowed_agents: Collection[str] | None = None
    ) -> RunInfo: ...

    async def wait(self, run_id: str, *, caller: str | None = None) -> RunResult: ...

    async def wait_all(
        self, run_ids: Sequence[str], *, timeout: float | None, caller: str | None = None
    ) -> builtins.list[RunInfo]: ...

    def runs(self, *, parent_id: str | None = None) -> builtins.list[RunInfo]: ...

    def startable(self, allowed: Collection[str]) -> tuple[str, ...]:
        """The agents ``allowed`` (an ``allowed_subagents`` list) admits that the catalog can
        start by name now (``membrane.agents.dispatch.startable``)."""
        ...

    async def stop(self, run_id: str, *, caller: str | None = None) -> RunInfo: ...

    def message(
        self,
        run_id: str,
        text: str,
        *,
        request_id: str | None = None,
        caller: str | None = None,
        kind: str | None = None,
    ) -> Delivery: ...


class _FollowCatalog:
    """Keeps a scope's ``Task`` schema on the agents its parent may start now (``Scope.follow``):
    when the names change (a file added, removed, disabled), the tool is swapped for one whose
    ``agent`` enum lists the new names, so the next model request offers exactly them."""

    __slots__ = ("_allowed", "_build", "_host", "_names")

    def __init__(
        self,
        host: DelegationHost,
        allowed: tuple[str, ...],
        names: tuple[str, ...],
        build: Callable[[tuple[str, ...]], Tool],
    ) -> None:
        self._host = host
        self._allowed = allowed
        self._names = names
        self._build = build

    def __call__(self, scope: Scope) -> None:
        names = self._host.startable(self._allowed)
        if names != self._names and "Task" in scope.locals():
            self._names = names
            scope.add_local(self._build(names), replace=True)


def delegation_tools(
    host: DelegationHost,
    *,
    parent_id: str,
    allowed: Sequence[str],
    config: DelegationConfig,
    role: str | None = None,
    names: Sequence[str] = DELEGATION_TOOLS,
) -> tuple[Tool, ...]:
    """The delegation tools for ``parent_id``; ``allowed`` is its ``allowed_subagents``.

    ``Task``'s ``agent`` is an ``enum`` of the agents ``allowed`` admits that the catalog can
    start now (a plain string when there is none), so constrained decoding can only write one
    of them; ``follow_catalog`` keeps it current in a scope."""
    return _DelegationSet(host, parent_id, tuple(allowed), config, role).tools(names)


def follow_catalog(
    scope: Scope,
    host: DelegationHost,
    *,
    parent_id: str,
    allowed: Sequence[str],
    config: DelegationConfig,
    role: str | None = None,
) -> None:
    """Keep the ``Task`` tool of ``scope`` (made by ``delegation_tools`` with the same
    arguments) on the agents ``allowed`` admits in the catalog at each view."""
    tools = _DelegationSet(host, parent_id, tuple(allowed), config, role)
    # The Task tool in ``scope`` was made a moment ago, from the catalog as it is now.
    names = host.startable(tools.allowed)
    scope.follow(_FollowCatalog(host, tools.allowed, names, tools.task_tool))


class _DelegationSet:
    """The delegation tools of one parent: their handlers, bound to ``parent_id``."""

    def __init__(
        self,
        host: DelegationHost,
        parent_id: str,
        allowed: tuple[str, ...],
        config: DelegationConfig,
        role: str | None,
    ) -> None:
        self.host = host
        self.parent_id = parent_id
        self.allowed = allowed
        self.config = config
        self.role = role

    def tools(self, names: Sequence[str]) -> tuple[Tool, ...]:
        catalog = self.catalog(self.host.startable(self.allowed) if "Task" in names else ())
        return tuple(catalog[name] for name in names if name in catalog)

    def task_tool(self, startable: tuple[str, ...]) -> Tool:
        return self.catalog(startable)["Task"]

    def catalog(self, startable: tuple[str, ...]) -> dict[str, Tool]:
        """Every delegation tool of this parent, by name; ``Task`` names ``startable`` (or,
        when it is empty, what ``allowed`` admits)."""
        agents = ", ".join(startable) if startable else _allowed_text(self.allowed)
        handlers = {
            "Task": self.task,
            "TaskWait": self.task_wait,
            "TaskList": self.task_list,
            "TaskStop": self.task_stop,
            "TaskMessage": self.task_message,
        }
        return {
            name: Tool(
                name=name,
                description=_DESCRIPTIONS[name].format(agents=agents),
                input_schema=task_schema(startable) if name == "Task" else _SCHEMAS[name],
                handler=handler,
                mutating=name in MUTATING_DELEGATION_TOOLS,
            )
            for name, handler in handlers.items()
        }

    async def task(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        host, parent_id, allowed, config = self.host, self.parent_id, self.allowed, self.config
        agent = str(arguments["agent"])
        if not agent_allowed(allowed, agent):
            raise not_allowed(agent, allowed)
        call = CallParams.from_mapping(
            {key: arguments[key] for key in _CALL_KEYS if key in arguments}, where="Task"
        )
        request = SubagentStartRequest(
            agent_type=agent,
            task=str(arguments["task"]),
            call=call,
            persona=config.persona,
            tool_filter=config.tool_filter,
            max_depth=config.cap,
            parent_id=parent_id,
            request_id=task_request_id(parent_id, arguments),
            background=arguments.get("background"),
            role=self.role,
            budget=arguments.get("budget"),
        )
        try:
            info = await host.start(request, allowed_agents=allowed)
        except ToolFilterError as exc:
            # Only the deployment's filter reaches here, and it was valid at mount: the registry
            # changed since. The model cannot fix that, and must not learn tool names from it.
            raise type(exc)(
                "the deployment's delegation tool filter no longer matches the registered "
                "tools, so no subagent can be started right now; this is a deployment "
                "configuration problem, not something a different call can fix",
                label="delegation tool_filter",
            ) from None
        if info.background:
            return info.to_dict()
        result = info.result
        if result is None:
            (waited,) = await host.wait_all([info.run_id], timeout=None, caller=parent_id)
            if waited.result is None:
                # It asks a question (``AskParent``): the parent answers, then waits again.
                return {**waited.to_dict(), "note": _QUESTION_NOTE}
            result = waited.result
        if not result.ok:
            raise _child_failed(result)
        return result.to_dict()

    async def task_wait(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        ids = list(arguments["ids"])
        timeout = arguments.get("timeout")
        infos = await self.host.wait_all(ids, timeout=timeout, caller=self.parent_id)
        return {"runs": [info.to_dict() for info in infos]}

    async def task_list(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        return {"runs": [info.to_dict() for info in self.host.runs(parent_id=self.parent_id)]}

    async def task_stop(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        info = await self.host.stop(str(arguments["id"]), caller=self.parent_id)
        return info.to_dict()

    async def task_message(self, arguments: Mapping[str, Any], context: ToolContext) -> Any:
        delivery = self.host.message(
            str(arguments["id"]),
            str(arguments["message"]),
            request_id=derived_request_id("message", self.parent_id, arguments),
            caller=self.parent_id,
            kind=None if arguments.get("kind") is None else str(arguments["kind"]),
        )
        return delivery.to_dict()


#: What each delegation tool tells the model (``{agents}``: the subagents ``Task`` may start).
_DESCRIPTIONS: Final[Mapping[str, str]] = {
    "Task": (
        "Start a subagent on a task. In the foreground (default) the subagent's result "
        "comes back as this tool's result (an error result when the subagent fails); "
        "with background: true you get its run id at once and a notice when it "
        "finishes. Calls are deduplicated: repeating an identical call (same arguments) "
        "returns the subagent the first call started instead of starting another; give "
        "a new `request_id` to start a fresh subagent for the same arguments. "
        "Subagents you may start: {agents}."
    ),
    "TaskWait": (
        "Wait for your background subagents to finish (at most `timeout` seconds). "
        "Returns each one's state and, when finished, its result. Giving up the wait "
        "does not stop them. It returns early when one of them asks you a question: its "
        "entry then carries `question` (its id and text); answer with TaskMessage."
    ),
    "TaskList": "List the subagents you started, with their state and queue place.",
    "TaskStop": "Stop one of your subagents (and everything it started).",
    "TaskMessage": (
        "Send a message to one of your subagents: kind `brief` gives it new work or "
        "instructions, `ping` a note, `answer` answers the question it asked you (the "
        "default while it has one; otherwise `ping`). A brief or ping arrives once, at the "
        "subagent's next turn boundary (a subagent that is not running gets it when it is "
        "resumed); an answer is what its waiting question returns. "
        "Repeating an identical call does not send it twice; give a new `request_id` "
        "to send the same text again."
    ),
}


def task_schema(startable: Sequence[str]) -> Mapping[str, Any]:
    """``Task``'s input schema with ``agent`` limited to ``startable`` (when there is any)."""
    if not startable:
        return _TASK_SCHEMA
    agent = {
        "type": "string",
        "enum": list(startable),
        "description": "The subagent to start: one of the names listed.",
    }
    return {**_TASK_SCHEMA, "properties": {**_TASK_SCHEMA["properties"], "agent": agent}}


_TASK_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "agent": {"type": "string", "minLength": 1, "description": "The subagent type."},
        "task": {"type": "string", "minLength": 1, "description": "The brief."},
        "background": {"type": "boolean"},
        "model": {"type": "string", "minLength": 1},
        "thinking": {"type": "string", "minLength": 1},
        "max_turns": {"type": "integer", "minimum": 1},
        "inherit_context": {"type": "boolean"},
        "isolated": {"type": "boolean"},
        "isolation": {"type": "string", "enum": ["off", "worktree"]},
        "budget": {
            "type": "object",
            "description": (
                "What the subagent and everything it starts may spend, within what remains of "
                "yours: tokens, turns, tool_calls, children (whole numbers), seconds."
            ),
            "properties": {
                **{kind: {"type": "integer", "minimum": 0} for kind in BUDGET_KINDS[:4]},
                "seconds": {"type": "number", "exclusiveMinimum": 0},
            },
            "additionalProperties": False,
        },
        "request_id": {
            "type": "string",
            "minLength": 1,
            "description": (
                "Deduplication key: a call repeating an earlier call's request_id returns that "
                "call's subagent. Omitted, it is derived from the other arguments."
            ),
        },
    },
    "required": ["agent", "task"],
    "additionalProperties": False,
}


_QUESTION_NOTE: Final = (
    "the subagent asks you the question above and waits: answer it with TaskMessage (its "
    "run id and your answer), then TaskWait for its result"
)


def agent_allowed(allowed: Collection[str], name: str) -> bool:
    """Whether ``allowed`` (an ``allowed_subagents`` list; ``*`` is any agent) admits ``name``,
    case-insensitively."""
    names = {a.lower() for a in allowed}
    return "*" in names or name.lower() in names


def not_allowed(agent: str, allowed: Collection[str]) -> UnknownSubagent:
    """The refusal of ``agent`` that names only what the caller may start (``allowed``), never
    other agents of the catalog."""
    return UnknownSubagent(
        f"cannot start {agent!r}: it is not an agent this agent may start "
        f"(it may start: {_allowed_text(allowed)}); use one of those names",
        agent=agent,
        allowed=list(allowed),
    )


def task_request_id(parent_id: str, arguments: Mapping[str, Any]) -> str:
    """The idempotency key of one ``Task`` call (see ``derived_request_id``)."""
    return derived_request_id("task", parent_id, arguments)


def derived_request_id(tool: str, parent_id: str, arguments: Mapping[str, Any]) -> str:
    """The idempotency key of one delegation tool call, scoped to the tool and the calling
    parent so that two parents never share a child or a message: the model's ``request_id``
    when given, else a digest of the call's canonical JSON input (sorted keys, no
    whitespace)."""
    given = arguments.get("request_id")
    if isinstance(given, str) and given:
        return f"{tool}:{parent_id}:id:{given}"
    canonical = json.dumps(
        dict(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]
    return f"{tool}:{parent_id}:input:{digest}"


def _allowed_text(allowed: Collection[str]) -> str:
    if any(name == "*" for name in allowed):
        return "any enabled agent"
    return ", ".join(allowed) or "none"


def _child_failed(result: RunResult) -> ChildFailed:
    error = dict(result.error) if result.error is not None else None
    message = f"subagent {result.agent!r} ({result.run_id}) ended with status {result.status}"
    if error is not None:
        message += f": {error.get('code')}: {error.get('message')}"
    if result.text:
        message += f"\nIts last text: {result.text}"
    return ChildFailed(
        message,
        run_id=result.run_id,
        agent=result.agent,
        status=result.status,
        error=error,
        result=result.to_dict(),
    )


_WAIT_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "ids": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "minItems": 1,
            "uniqueItems": True,
        },
        "timeout": {"type": "number", "minimum": 0},
    },
    "required": ["ids"],
    "additionalProperties": False,
}
_MESSAGE_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "minLength": 1, "description": "The subagent's run id."},
        "message": {"type": "string", "minLength": 1},
        "kind": {"type": "string", "enum": ["ping", "brief", "answer"]},
        "request_id": {
            "type": "string",
            "minLength": 1,
            "description": (
                "Deduplication key: a call repeating an earlier call's request_id is not sent "
                "again. Omitted, it is derived from the other arguments."
            ),
        },
    },
    "required": ["id", "message"],
    "additionalProperties": False,
}
_STOP_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {"id": {"type": "string", "minLength": 1}},
    "required": ["id"],
    "additionalProperties": False,
}

#: The input schema of each delegation tool but ``Task`` (``task_schema`` gives its own).
_SCHEMAS: Final[Mapping[str, Mapping[str, Any]]] = {
    "TaskWait": _WAIT_SCHEMA,
    "TaskList": {"type": "object", "properties": {}, "additionalProperties": False},
    "TaskStop": _STOP_SCHEMA,
    "TaskMessage": _MESSAGE_SCHEMA,
}
