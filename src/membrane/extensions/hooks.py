"""Extension lifecycle hooks, dispatched in Pi's order.

An agent loop emits five events to the extensions bound into its child:

``session_start``
    once, after the extensions are bound and before the first model request. A tool an in-scope
    extension registers here is offered on turn 1.
``before_agent_start``
    once, after ``session_start``, before the first request. A handler may change the system
    prompt (return a string, return ``{"system_prompt": ...}``, or assign
    ``event.system_prompt``), add a user message (``{"message": ...}``) or register tools.
``before_tool_call``
    before each in-scope call runs (a call the live view vetoes never reaches it). Returning
    ``{"block": True, "reason": ...}`` blocks the call; the model gets an error tool result.
``turn_end``
    after each turn: the model's reply and the results of the calls it made.
``session_shutdown``
    on every exit path, including errors and cancellation.

Extensions register handlers with ``ext.on(event, handler)`` in their ``setup(ext)``
(``membrane.extensions.load``); ``ExtensionHooks.from_extensions(loaded)`` collects them. A
handler is called as ``handler(event)`` with one of the event objects below, may be sync or
async, and runs in the order the extensions were bound and, within one extension, in the order
it was registered. Handlers reach their extension's tools through the ``ext`` they closed over.

Failures: a handler that raises in ``session_start``, ``before_agent_start`` or ``turn_end``
fails the run with ``extension-hook-failed`` naming the extension and the event. A
``before_tool_call`` handler that raises blocks that call (fail closed); the run goes on. Every
``session_shutdown`` handler runs even if another one raised; the failures are returned so the
loop can report them without masking how the run ended. Cancellation is never caught.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from membrane.errors import ExtensionError, ExtensionHookFailed
from membrane.json_types import JSONObject
from membrane.tools.restriction import closest_name
from membrane.vocabulary import HOOK_EVENTS, HookEventName

__all__ = [
    "BeforeAgentStart",
    "BeforeToolCall",
    "CallBlock",
    "CallLike",
    "ExtensionHooks",
    "HookHandler",
    "MessageLike",
    "SessionShutdown",
    "SessionStart",
    "TurnEnd",
    "hook_problem",
]

#: ``handler(event)``; sync or async. Only ``before_agent_start`` and ``before_tool_call``
#: results are read.
HookHandler = Callable[[Any], object]


class CallLike(Protocol):
    """What an event carries of one tool call (``membrane.models.ToolCall`` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def arguments(self) -> JSONObject: ...


class MessageLike(Protocol):
    """What an event carries of one message (``membrane.models.Message`` is one)."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...

    @property
    def tool_calls(self) -> Sequence[CallLike]: ...

    @property
    def tool_call_id(self) -> str | None: ...

    @property
    def name(self) -> str | None: ...

    @property
    def is_error(self) -> bool: ...


def hook_problem(event: str, handler: object) -> str | None:
    """What is wrong with hooking ``handler`` to ``event`` (``None``: nothing), as the end of
    a sentence that starts with the extension's name."""
    if event not in HOOK_EVENTS:
        suggestion = closest_name(event, HOOK_EVENTS)
        hint = f"; did you mean {suggestion!r}?" if suggestion else ""
        return f"hooks unknown event {event!r}{hint} (events: {', '.join(HOOK_EVENTS)})"
    if not callable(handler):
        return f"hooks {event} with a handler that is not callable"
    return None


@dataclass(slots=True)
class SessionStart:
    agent: str
    run_id: str
    #: True when the run continues a stored run (``SubagentRuntime.resume``); a fork-mode
    #: child that starts from a copy of its parent's conversation is not resumed.
    resumed: bool


@dataclass(slots=True)
class BeforeAgentStart:
    """Mutable: handlers may assign ``system_prompt`` or append to ``messages``."""

    agent: str
    run_id: str
    prompt: str
    system_prompt: str
    messages: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BeforeToolCall:
    agent: str
    run_id: str
    turn: int
    call: CallLike

    @property
    def tool_name(self) -> str:
        return self.call.name

    @property
    def arguments(self) -> JSONObject:
        return self.call.arguments


@dataclass(frozen=True, slots=True)
class TurnEnd:
    agent: str
    run_id: str
    turn: int
    message: MessageLike
    tool_results: tuple[MessageLike, ...]


@dataclass(frozen=True, slots=True)
class SessionShutdown:
    agent: str
    run_id: str
    #: How the run ended: a loop status, or ``"cancelled"`` when its task was cancelled.
    status: str


@dataclass(frozen=True, slots=True)
class CallBlock:
    """A ``before_tool_call`` decision to block; ``extension`` is the one that decided."""

    extension: str
    reason: str


@dataclass(frozen=True, slots=True)
class _Binding:
    extension: str
    event: HookEventName
    handler: HookHandler


class _LoadedExtension(Protocol):
    """What ``from_extensions`` reads from a ``membrane.extensions.load.LoadedExtension``."""

    @property
    def name(self) -> str: ...

    @property
    def hooks(self) -> Mapping[str, Sequence[HookHandler]]: ...


class ExtensionHooks:
    """The lifecycle handlers of the extensions bound into one child, ready to dispatch."""

    __slots__ = ("_bindings",)

    def __init__(self) -> None:
        self._bindings: dict[HookEventName, list[_Binding]] = {name: [] for name in HOOK_EVENTS}

    @classmethod
    def from_extensions(cls, extensions: Iterable[_LoadedExtension]) -> ExtensionHooks:
        """Collect the handlers each extension registered with ``ext.on(event, handler)``.

        Extensions dispatch in the order given (the order they were bound).
        """
        hooks = cls()
        for extension in extensions:
            for event, handlers in extension.hooks.items():
                for handler in handlers:
                    hooks.add(extension.name, event, handler)
        return hooks

    def add(self, extension: str, event: str, handler: HookHandler) -> None:
        """Bind ``handler`` for ``event`` on behalf of ``extension``."""
        problem = hook_problem(event, handler)
        if problem is not None:
            raise ExtensionError(
                f"extension {extension!r} {problem}", extension=extension, event=event
            )
        name = cast(HookEventName, event)
        self._bindings[name].append(_Binding(extension, name, handler))

    def only(self, extensions: Iterable[str]) -> ExtensionHooks:
        """The handlers of ``extensions`` alone: a child binds only the extensions it loaded
        (none when it is isolated), so no other extension hears its lifecycle."""
        keep = frozenset(extensions)
        hooks = ExtensionHooks()
        for event, bindings in self._bindings.items():
            hooks._bindings[event] = [b for b in bindings if b.extension in keep]
        return hooks

    def handlers(self, event: HookEventName) -> tuple[tuple[str, HookHandler], ...]:
        """``(extension, handler)`` pairs for ``event``, in dispatch order."""
        return tuple((b.extension, b.handler) for b in self._bindings[event])

    def __bool__(self) -> bool:
        return any(self._bindings.values())

    async def session_start(self, event: SessionStart) -> None:
        for binding in self._bindings["session_start"]:
            await _invoke(binding, event)

    async def before_agent_start(self, event: BeforeAgentStart) -> BeforeAgentStart:
        """Run every handler in order; each sees the prompt as the previous one left it."""
        for binding in self._bindings["before_agent_start"]:
            result = await _invoke(binding, event)
            if isinstance(result, str):
                event.system_prompt = result
            elif isinstance(result, Mapping):
                prompt = result.get("system_prompt", result.get("systemPrompt"))
                if prompt is not None:
                    event.system_prompt = _text(binding, "system_prompt", prompt)
                message = result.get("message")
                if message is not None:
                    event.messages.append(_text(binding, "message", message))
            elif result is not None:
                raise _failure(
                    binding,
                    f"returned {type(result).__name__}; return None, a string (the new system "
                    "prompt) or a mapping with 'system_prompt' and/or 'message'",
                )
        return event

    async def before_tool_call(self, event: BeforeToolCall) -> CallBlock | None:
        """The first block decision, or ``None``; a handler that raises blocks the call."""
        for binding in self._bindings["before_tool_call"]:
            try:
                result = await _invoke(binding, event)
            except ExtensionHookFailed as exc:
                return CallBlock(binding.extension, f"its hook failed: {exc.data['cause']}")
            if isinstance(result, Mapping) and result.get("block"):
                reason = result.get("reason")
                return CallBlock(binding.extension, str(reason) if reason else "blocked")
        return None

    async def turn_end(self, event: TurnEnd) -> None:
        for binding in self._bindings["turn_end"]:
            await _invoke(binding, event)

    async def session_shutdown(self, event: SessionShutdown) -> list[ExtensionHookFailed]:
        """Run every handler; return the failures instead of raising the first one."""
        failures: list[ExtensionHookFailed] = []
        for binding in self._bindings["session_shutdown"]:
            try:
                await _invoke(binding, event)
            except ExtensionHookFailed as exc:
                failures.append(exc)
        return failures


async def _invoke(binding: _Binding, event: object) -> object:
    try:
        result = binding.handler(event)
        if inspect.isawaitable(result):
            result = await result
    except ExtensionHookFailed:
        raise
    except Exception as exc:
        raise _failure(binding, f"raised {type(exc).__name__}: {exc}") from exc
    return result


def _failure(binding: _Binding, what: str) -> ExtensionHookFailed:
    return ExtensionHookFailed(
        f"extension {binding.extension!r}: its {binding.event} hook {what}",
        extension=binding.extension,
        event=binding.event,
        cause=what,
    )


def _text(binding: _Binding, key: str, value: object) -> str:
    if not isinstance(value, str):
        raise _failure(binding, f"returned a non-string {key!r} ({type(value).__name__})")
    return value
