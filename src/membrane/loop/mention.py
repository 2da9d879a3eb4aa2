"""The mention clone (seed 003 section 3): ``@NAME rest`` delegated by a throwaway parent copy.

When a user writes ``@reviewer check the auth change``, the parent does not answer it itself.
A clone of the parent runs in memory: the parent's actual context messages (tool results
included, unlike ``inherit_context``), the live system prompt, and exactly one callable tool,
the delegation tool. It spends one model turn choosing how to call the real child, its calls
run, and it is disposed. The clone's scope is private and sits over an empty registry, so no
other tool can run, whatever the model sends: any other name is vetoed like in the agent loop.
The real child still follows its own frontmatter; the clone only chooses the call.

``delegate_mention`` is how the agent loop uses it. The clone's ``Task`` is the parent's own,
reached through the parent's live view at the moment of the call (so the parent's scope stays
the authority), and restricted to the mentioned agent: a call that names any other agent is
refused with an ``unknown-subagent`` error result. Whether ``NAME`` is an agent the parent may
start is decided by the delegation tool itself (its ``allowed_subagents`` and the catalog),
the same check a call of the parent's own meets. When the clone made no call, or every call
was refused as ``unknown-subagent`` (``NAME`` is not an agent the parent may start), the
message is ordinary text for the parent. Otherwise the parent's conversation gains the user's
message, an assistant message carrying the clone's calls, and their results (a child's answer,
or why the start or the child failed): the ``Task`` result keeps the authority of a tool
result, exactly as if the parent had made the call.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from membrane.errors import InvalidRequest, MembraneError, ModelError, UnknownSubagent
from membrane.loop.calls import Emit, error_code, result_event, run_tool_call
from membrane.models.base import Message, Model, ModelRequest, ModelResponse, ToolCall, Usage
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext
from membrane.vocabulary import SPAWN_TOOL

__all__ = [
    "MentionCall",
    "MentionDelegation",
    "MentionResult",
    "delegate_mention",
    "only_agent",
    "parse_mention",
    "run_mention_clone",
]

#: The delegation tool a mention clone calls (the parent's own).

#: ``@`` at the start of the message, then a name of letters, digits, ``_``, ``-`` and inner
#: ``.``/``:``, ended by whitespace, end of text, or punctuation such as ``,`` or ``:``.
_MENTION = re.compile(
    r"\s*@(?P<name>[A-Za-z0-9_](?:[A-Za-z0-9_.:\-]*[A-Za-z0-9_])?)"
    r"(?=$|[\s,;:!?.)])(?P<rest>.*)\Z",
    re.DOTALL,
)
_LEADING_PUNCTUATION = " \t\r\n,;:!?."


def parse_mention(text: str) -> tuple[str, str] | None:
    """``(name, rest)`` when ``text`` starts with ``@NAME``; ``None`` otherwise.

    Leading whitespace is allowed; the separator after the name (``,``, ``:``, spaces) is not
    part of ``rest``, which keeps the rest of the message as written. An address in the middle
    of a sentence (``mail me@example.com``) is not a mention.
    """
    if not isinstance(text, str):
        return None
    match = _MENTION.match(text)
    if match is None:
        return None
    rest = match.group("rest").lstrip(_LEADING_PUNCTUATION).rstrip()
    return match.group("name"), rest


@dataclass(frozen=True, slots=True)
class MentionCall:
    """One delegation call the clone made, with the ``tool`` message that answered it."""

    call: ToolCall
    result: Message


@dataclass(frozen=True, slots=True)
class MentionResult:
    """What the clone did: its own text, and each call it made with its result."""

    name: str
    rest: str
    text: str
    calls: tuple[MentionCall, ...]
    usage: Usage

    @property
    def delegated(self) -> bool:
        """True when at least one delegation call succeeded."""
        return any(not call.result.is_error for call in self.calls)


def _ignore(kind: str, data: object) -> None:
    return None


async def run_mention_clone(
    model: Model,
    messages: Sequence[Message],
    system_prompt: str,
    delegation_tool: Tool,
    mention: str,
    *,
    context: ToolContext,
    agent: str = "mention",
    run_id: str | None = None,
    model_name: str | None = None,
    thinking: str | None = None,
    turn: int = 1,
    emit: Emit = _ignore,
) -> MentionResult:
    """Run one clone turn for ``mention`` and execute the delegation call(s) it chooses.

    The clone's request carries ``agent`` and ``run_id`` (a fresh id by default), so a scripted
    model can script the clone apart from the parent; ``turn`` is the turn its call events
    carry (the parent's turn that the mention precedes). Calls to anything but
    ``delegation_tool`` become ``tool-not-visible`` error results. Raises ``InvalidRequest``
    when ``mention`` is not ``@NAME ...`` and ``ModelError`` when the model fails; the caller
    decides what to do when the clone made no call (``MentionResult.calls`` is empty).
    """
    parsed = parse_mention(mention)
    if parsed is None:
        raise InvalidRequest(
            f"not a mention: {mention[:80]!r}; a mention starts with @NAME", text=mention[:80]
        )
    name, rest = parsed
    scope = Scope(ToolRegistry(), name=f"mention-clone:{name}")
    scope.add_local(delegation_tool)
    tool_name = delegation_tool.name
    clone_run = run_id if run_id is not None else f"mention-{uuid.uuid4().hex[:12]}"
    instruction = (
        f"{mention.strip()}\n\n"
        f"(This message is addressed to the agent {name!r}. Do not do the work yourself: call "
        f"the {tool_name} tool to delegate it to {name!r}, choosing its task and parameters "
        "from the conversation so far.)"
    )
    request = ModelRequest(
        agent=agent,
        run_id=clone_run,
        system=system_prompt,
        messages=(*messages, Message(role="user", content=instruction)),
        tools=tuple(scope.view().schemas()),
        model=model_name,
        thinking=thinking,
    )
    response = await _ask(model, request)
    calls: list[MentionCall] = []
    for call in response.tool_calls:
        emit("tool_call", {"name": call.name, "id": call.id, "turn": turn})
        result = await run_tool_call(
            scope, call, context, agent=agent, run_id=clone_run, turn=turn, emit=emit
        )
        emit("tool_result", result_event(call, result))
        calls.append(MentionCall(call, result))
    return MentionResult(name, rest, response.text, tuple(calls), response.usage)


async def _ask(model: Model, request: ModelRequest) -> ModelResponse:
    label = getattr(model, "name", type(model).__name__)
    try:
        response = await model.request(request)
    except MembraneError:
        raise
    except Exception as exc:
        raise ModelError(
            f"the model {label!r} failed in a mention clone: {type(exc).__name__}: {exc}",
            model=label,
        ) from exc
    if not isinstance(response, ModelResponse):
        raise ModelError(
            f"the model {label!r} returned {type(response).__name__}, not a ModelResponse",
            model=label,
        )
    if response.stop_reason == "error":
        raise ModelError(
            f"the model {label!r} stopped with an error in a mention clone",
            model=label,
            stop_reason="error",
        )
    return response


@dataclass(frozen=True, slots=True)
class MentionDelegation:
    """What a mention adds to the parent's conversation, and what the clone's turn cost.

    ``delegated``: at least one of the clone's calls succeeded.
    """

    messages: tuple[Message, ...]
    usage: Usage
    delegated: bool


def only_agent(tool: Tool, name: str, *, scope: Scope) -> Tool:
    """``tool`` (the parent's delegation tool) as the clone sees it: it starts only ``name``
    (matched case-insensitively, as the delegation tool matches agent types), and every call
    runs through ``scope``'s live view, so a ``Task`` the parent lost meanwhile is vetoed."""

    schema: dict[str, Any] = dict(tool.input_schema)
    properties: dict[str, Any] = dict(schema.get("properties") or {})
    listed: Any = properties.get("agent", {}).get("enum") if properties else None
    # The parent's ``agent`` enum lists what it may start. The clone's ``agent`` is a plain
    # string, so that a call naming another agent reaches the handler and is refused as
    # ``unknown-subagent``, as is every call when ``name`` is not one the parent may start.
    startable = listed is None or any(
        isinstance(a, str) and a.lower() == name.lower() for a in listed
    )
    if listed is not None:
        properties["agent"] = {
            "type": "string",
            "minLength": 1,
            "description": f"The subagent to start: {name!r}.",
        }
        schema["properties"] = properties

    async def handler(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        agent = arguments.get("agent")
        if not startable:
            raise UnknownSubagent(
                f"cannot start {name!r}: it is not an agent this agent may start",
                agent=str(agent),
            )
        if not isinstance(agent, str) or agent.lower() != name.lower():
            raise UnknownSubagent(
                f"this message is addressed to {name!r}: the delegation may start only "
                f"{name!r}, not {agent!r}",
                agent=str(agent),
                allowed=[name],
            )
        return await scope.view().call(tool.name, arguments, context)

    return Tool(
        name=tool.name,
        description=f"{tool.description} Here it may start only {name!r}.",
        input_schema=schema,
        handler=handler,
        origin="scope",
        mutating=tool.mutating,
    )


async def delegate_mention(
    model: Model,
    scope: Scope,
    messages: Sequence[Message],
    system_prompt: str,
    text: str,
    *,
    context: ToolContext,
    model_name: str | None = None,
    thinking: str | None = None,
    turn: int = 1,
    emit: Emit = _ignore,
) -> MentionDelegation | None:
    """Run the mention clone for the user message ``text`` of the agent owning ``scope``.

    ``None`` when ``text`` is not a mention or the live view has no delegation tool: the
    message is then ordinary text. Otherwise the clone runs (its request carries
    ``agent="mention"``) and the result says what the conversation gains: the user's message
    alone when the clone made no call or was refused the agent, else also the clone's calls
    and their results.
    """
    parsed = parse_mention(text)
    if parsed is None:
        return None
    delegation = scope.view().find(SPAWN_TOOL)
    if delegation is None:
        return None
    clone = await run_mention_clone(
        model,
        messages,
        system_prompt,
        only_agent(delegation, parsed[0], scope=scope),
        text,
        context=context,
        model_name=model_name,
        thinking=thinking,
        turn=turn,
        emit=emit,
    )
    user = Message(role="user", content=text)
    refused = UnknownSubagent.code
    if all(error_code(c.result) == refused for c in clone.calls):
        return MentionDelegation((user,), clone.usage, delegated=False)
    reply = Message(
        role="assistant", content=clone.text, tool_calls=tuple(c.call for c in clone.calls)
    )
    results = tuple(c.result for c in clone.calls)
    return MentionDelegation((user, reply, *results), clone.usage, delegated=clone.delegated)
