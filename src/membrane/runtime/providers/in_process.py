"""``InProcessProvider``: children as ``AgentLoop``s in this process, each with its own scope.

It enforces every control: the persona is a section of the child's own prompt, the tool filter
is a restriction on the child's scope (one resolver for schemas and execution), depth is counted
by the runtime, which sees every start, and a ``response_schema`` is enforced by the loop, which
asks again until the final answer matches it. Children take steering messages and runtime
notices (``notify``), and a user message of the form ``@NAME rest`` to a child that holds
``Task`` goes through the mention clone first (see ``membrane.loop.agent_loop``).

Modes:

* ``spawn``: a fresh conversation holding only the task (and the resolver's inherited-context
  prefix when the definition asks for it);
* ``fork``: a copy of the parent's conversation so far, then the task. The parent's last reply
  is usually the unanswered delegation call itself; a copy never ends in unanswered tool calls,
  so that reply and any partial results after it are left out.

In either mode a resumed child (``ChildSpec.resumed``) continues ``ChildSpec.transcript``, its
own stored conversation: the provider advertises ``resume``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final, Literal

from membrane.errors import InvalidRequest
from membrane.extensions.hooks import ExtensionHooks
from membrane.loop.agent_loop import AgentLoop
from membrane.models.base import Message, Model
from membrane.models.limiter import LimitedModel
from membrane.models.specs import ModelRouter
from membrane.runtime.provider import (
    ChildOutcome,
    ChildSpec,
    SetupCallback,
    SubagentCapabilities,
)
from membrane.sandbox import WRITING_TOOLS
from membrane.tools.scope import Scope
from membrane.tools.spec import ToolContext

__all__ = ["InProcessProvider", "fork_transcript"]

Mode = Literal["spawn", "fork"]
_MODES: Final = ("spawn", "fork")


class InProcessProvider:
    """Runs each child as an ``AgentLoop`` on ``model`` in this process. A ``ModelRouter``
    gives each child the model its spec names (``ModelRouter.bind``); any other ``Model``
    answers every child.

    ``hooks`` holds the lifecycle handlers of every loaded extension; each child is bound only
    to the handlers of the extensions its definition loaded.
    """

    capabilities = SubagentCapabilities(
        persona=True, tool_filter=True, depth_limit=True, structured_output=True, resume=True
    )

    def __init__(
        self,
        model: Model,
        *,
        mode: Mode = "spawn",
        hooks: ExtensionHooks | None = None,
        name: str | None = None,
    ) -> None:
        if mode not in _MODES:
            raise InvalidRequest(
                f"InProcessProvider mode must be 'spawn' or 'fork', got {mode!r}", field="mode"
            )
        if not callable(getattr(model, "request", None)):
            raise InvalidRequest(
                f"InProcessProvider needs a Model (with async request()), got "
                f"{type(model).__name__}",
                field="model",
            )
        self.model = model
        self.mode: Mode = mode
        self.hooks = hooks
        self.name = name or f"in-process:{mode}"

    async def create(self, request: ChildSpec, setup: SetupCallback) -> _InProcessChild:
        # A router builds the model the child's spec names now, so an unknown name or a
        # missing key fails the start, before any run; any other model answers every child.
        model = (
            self.model.bind(
                request.model, fallbacks=request.fallback_models, planning=request.planning
            )
            if isinstance(self.model, ModelRouter)
            else self.model
        )
        if request.request_lane is not None:
            model = LimitedModel(model, request.request_lane)
        scope = Scope(request.registry, name=f"agent:{request.run_id}")
        composition = setup(scope)
        # A resumed child continues its own stored conversation, whatever the mode.
        forks = self.mode == "fork" or request.resumed
        history = fork_transcript(request.transcript) if forks else ()
        loop = AgentLoop(
            model=model,
            scope=scope,
            agent=request.agent,
            run_id=request.run_id,
            system=composition.system,
            task=request.task,
            messages=history,
            resumed=request.resumed,
            context=ToolContext(
                agent=request.agent,
                run_id=request.run_id,
                cwd=request.cwd,
                read_only=(
                    WRITING_TOOLS.isdisjoint(scope.view().visible)
                    if request.writes is None
                    else not request.writes
                ),
                env=request.env,
                network=request.network,
                read_paths=request.read_paths,
                ask_read=request.ask_read,
            ),
            max_turns=request.max_turns,
            grace_turns=request.grace_turns,
            model_name=request.model,
            thinking=request.thinking,
            tool_choice=request.tool_choice,
            response_schema=composition.response_schema,
            hooks=self.hooks.only(request.extensions) if self.hooks is not None else None,
            emit=request.emit,
            spending=request.spending,
            barrier=request.barrier,
            price=request.price,
        )
        return _InProcessChild(scope, loop)


class _InProcessChild:
    __slots__ = ("_loop", "_scope")

    def __init__(self, scope: Scope, loop: AgentLoop) -> None:
        self._scope = scope
        self._loop = loop

    @property
    def scope(self) -> Scope:
        return self._scope

    def run(self) -> Coroutine[Any, Any, ChildOutcome]:
        # The loop's own coroutine: no frame of this one per waiting child.
        return self._loop.run()

    def steer(self, message: str) -> bool:
        self._loop.steer(message)
        return True

    def notify(self, message: str, *, on_delivered: Callable[[], None] | None = None) -> bool:
        return self._loop.notify(message, on_delivered=on_delivered)

    def withdraw(self, on_delivered: Callable[[], None]) -> bool:
        """Take back a notice not yet in the conversation (``AgentLoop.withdraw``)."""
        return self._loop.withdraw(on_delivered)

    def stop(self) -> None:
        self._loop.stop()

    def discard(self) -> None:
        """Nothing to release: an unrun loop holds no task, process or connection."""

    def messages(self) -> Sequence[Message]:
        return self._loop.messages


def fork_transcript(messages: Sequence[Message]) -> tuple[Message, ...]:
    """``messages`` up to the last point where every tool call has its result."""
    kept = list(messages)
    while kept:
        last_call = next((i for i in range(len(kept) - 1, -1, -1) if kept[i].tool_calls), None)
        if last_call is None:
            break
        wanted = {call.id for call in kept[last_call].tool_calls}
        answered = {m.tool_call_id for m in kept[last_call + 1 :] if m.role == "tool"}
        if wanted <= answered:
            break
        del kept[last_call:]
    return tuple(kept)
