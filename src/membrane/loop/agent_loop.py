"""The agent loop: one child's turns under its live tool scope.

Each turn the loop resolves the child's ``ToolView`` afresh (``scope.view()``, cached by registry
and scope versions, so this is cheap) and offers exactly that set to the model: a tool an
in-scope extension registers during a turn is offered on the next one, and a tool outside the
scope is never offered. Every call the model returns is checked again against the live view at
the moment it executes, before and after the extensions' ``before_tool_call`` hooks, so a call
to a tool that was never offered (forged, or registered after the request was built) is vetoed:
the model gets an error tool result that names only what it asked for.

One run, in order: ``session_start`` and ``before_agent_start`` hooks (the second may change
the system prompt or register tools); the task as the first new user message; then turns. A
turn injects queued steering messages, then queued runtime notices, resolves the view, asks the
model, and runs the calls one by one; a steer that arrives meanwhile lands after the current
call, and the reply's remaining calls are answered ``tool-skipped``. ``turn_end`` follows each
turn. At ``max_turns`` a wrap-up message is injected and ``grace_turns`` more turns are
allowed. With a ``response_schema`` the final answer must be JSON matching it (strict JSON:
``NaN``, ``Infinity`` and numbers too large for a float are refused, as no store or wire can
carry them); otherwise the model is told what is wrong and tries again (at most
``max_output_retries`` times, within the turn budget). ``session_shutdown`` runs on every exit
path, shielded from cancellation.

Runtime notices (``notify()``; the runtime's outbox sends one when a background child ends) are
not user messages: they wait for the next turn boundary, so the calls of the current reply all
run, and they are injected as user-role messages because that is the one role every model API
accepts between turns; the text itself (``task_notification``) says it is a runtime notice and
fences the child's output. A notice's ``on_delivered`` callback runs right after the notice
joins the conversation, and only then. A notice never restarts a finished run: one still queued
when the model gives its final answer is dropped unacknowledged (the runtime's outbox keeps it
for a resumed run).

Mentions: when a user message (the task or a steer) is ``@NAME rest`` and the live view holds
the delegation tool ``Task``, a mention clone (``membrane.loop.mention``) spends one model
turn choosing how to call ``NAME``, and may start no other agent. The user's message, the
clone's calls and their ``Task`` results then join the conversation as if the agent had made
those calls, and the turn proceeds. The message stays ordinary text when there is no ``Task``
in view, when the clone makes no call, or when ``Task`` refuses ``NAME`` (``unknown-subagent``:
it is not an agent this one may start). The clone's usage counts toward the run's; its turn
does not count toward ``max_turns``.

Statuses (``ChildOutcome.status``):

``completed``
    the model gave a final answer (a reply without tool calls) within ``max_turns``.
``wrapped_up``
    the model gave its final answer after the turn limit told it to wrap up, i.e. during the
    grace turns. A host's ``steer()`` messages do not change the status.
``aborted``
    the grace turns ran out too. The calls of that last reply are not run: each is answered
    with an error tool result, so the transcript stays well formed for a resume.
``stopped``
    ``stop()`` was called (by the host). A cancelled task is not a status: the cancellation
    propagates after ``session_shutdown`` ran.
``error``
    a provider error, a reply that stopped for an error, a length stop with no text, a final
    answer that never matched ``response_schema``, or a failing extension hook. ``error`` holds
    ``{"code", "message", "data"}``.

The loop emits ``turn``, ``usage`` (each response's token counts), ``model_note`` (what the model's
adapter could not honour, such as a ``thinking`` level), ``tool_call``, ``tool_result`` and
``vetoed_call`` events; the runtime,
which owns the store and the result, emits ``published``, ``completed``, ``error`` and
``stopped``. Every ``tool_call`` is followed by exactly one ``tool_result``; a veto adds a
``vetoed_call`` between them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, cast

import anyio

from membrane.errors import (
    BudgetExceeded,
    InvalidRequest,
    MembraneError,
    ModelError,
    StructuredOutputInvalid,
)
from membrane.extensions.hooks import (
    BeforeAgentStart,
    ExtensionHooks,
    SessionShutdown,
    SessionStart,
    TurnEnd,
)
from membrane.limits import check_count
from membrane.loop.calls import SKIPPED, Emit, error_result, result_event, run_tool_call
from membrane.loop.command_hooks import CommandHookGate
from membrane.loop.final_answer import parse_final, schema_validator
from membrane.loop.mention import delegate_mention, parse_mention
from membrane.loop.outcome import NO_USAGE, ChildOutcome
from membrane.loop.overlap import claim, conflict
from membrane.loop.replies import checked_response
from membrane.loop.spending import Spending
from membrane.models.base import (
    Conversation,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    ToolCall,
    Usage,
)
from membrane.tools.scope import Scope
from membrane.tools.spec import ToolContext
from membrane.vocabulary import OK_STATES, TOOL_CHOICE_MODES, EndStatus

__all__ = ["WRAP_UP_MESSAGE", "AgentLoop"]

WRAP_UP_MESSAGE = (
    "You have reached your turn limit. Do not start new work: give your final answer now. "
    "You have at most {grace} more turn(s)."
)
_SKIPPED = "skipped: a new user message arrived before this call ran"
_NOT_RUN = "not run: the turn limit was reached"
_STOPPED = "not run: the run was stopped"
#: How long ``session_shutdown`` handlers may take once the run is over (they run shielded).
SHUTDOWN_TIMEOUT = 10.0


def _ignore(kind: str, data: Mapping[str, Any]) -> None:
    return None


class AgentLoop:
    """Drives one child: ``run()`` once; ``steer()`` and ``stop()`` from other tasks meanwhile.

    ``messages`` are earlier conversation messages (a resume, or a fork's copy of its parent's);
    ``task``, when not empty, is added as the next user message. ``resumed`` says the run
    continues a stored run (``SubagentRuntime.resume``), as ``session_start`` reports it.
    ``max_turns=None`` means no limit. ``barrier``, when given, is awaited before every model
    request after the first, once the turn's ``turn`` event (and with it what the runtime
    stores of the turns before) is emitted: a store's durability barrier, so that nothing the
    next request acts on can be lost (``Store.barrier``; the first request acts on the task,
    which the start made durable before the run began). The loop belongs to one event loop and
    is not thread-safe.
    """

    # Slots, and no per-loop queue until something is queued: a waiting child is a few objects
    # for the collector to follow, not a dict and two empty deques more.
    __slots__ = (
        "_barrier",
        "_cancel",
        "_context",
        "_cost",
        "_emit",
        "_grace_turns",
        "_hooks",
        "_malformed",
        "_max_output_retries",
        "_max_turns",
        "_messages",
        "_model",
        "_model_label",
        "_model_name",
        "_notices",
        "_price",
        "_resumed",
        "_schema",
        "_scope",
        "_spending",
        "_state",
        "_steering",
        "_stop_requested",
        "_system",
        "_task",
        "_text",
        "_thinking",
        "_tool_choice",
        "_tools_called",
        "_turns",
        "_usage",
        "_validator",
        "agent",
        "run_id",
    )

    def __init__(
        self,
        *,
        model: Model,
        scope: Scope,
        agent: str,
        run_id: str,
        system: str,
        task: str,
        messages: Sequence[Message] = (),
        resumed: bool = False,
        context: ToolContext,
        max_turns: int | None,
        grace_turns: int = 5,
        model_name: str | None = None,
        thinking: str | None = None,
        tool_choice: str | None = None,
        response_schema: Mapping[str, Any] | None = None,
        hooks: ExtensionHooks | None = None,
        emit: Emit = _ignore,
        max_output_retries: int = 3,
        spending: Spending | None = None,
        barrier: Callable[[], Awaitable[None]] | None = None,
        price: Callable[[str | None, Usage], int | None] | None = None,
    ) -> None:
        check_count(max_turns, what="max_turns", minimum=1, optional=True)
        check_count(grace_turns, what="grace_turns", minimum=0)
        check_count(max_output_retries, what="max_output_retries", minimum=0)
        self._model = model
        self._model_label = str(getattr(model, "name", type(model).__name__))
        self._scope = scope
        self.agent = agent
        self.run_id = run_id
        self._system = system
        self._task = task
        # The conversation's list is made when the run starts: a child waiting to run keeps
        # its history as given (the empty tuple of a fresh child is no object of its own).
        self._messages: list[Message] = cast(list[Message], tuple(messages))
        self._resumed = resumed is True
        self._context = context
        self._max_turns = max_turns
        self._grace_turns = grace_turns
        self._model_name = model_name
        self._thinking = thinking
        self._tool_choice = tool_choice
        self._tools_called = False
        self._schema = response_schema
        self._validator = schema_validator(response_schema)
        self._hooks = hooks
        self._emit = emit
        self._max_output_retries = max_output_retries
        self._spending = spending
        self._barrier = barrier
        #: What a response of a model (by name) costs in micro-dollars, ``None`` when unknown.
        self._price = price
        self._steering: deque[str] | None = None
        self._notices: deque[tuple[str, Callable[[], None] | None]] | None = None
        #: Why each malformed call of the last reply cannot run, by its stand-in's id.
        self._malformed: dict[str, str] = {}
        self._state: Literal["new", "running", "done"] = "new"
        self._stop_requested = False
        self._cancel: anyio.CancelScope | None = None
        self._turns = 0
        self._usage = NO_USAGE
        #: What the responses cost, in micro-dollars; ``None`` once one had no known price.
        self._cost: int | None = 0
        self._text = ""

    @property
    def messages(self) -> Conversation:
        """The conversation so far: a view made in constant time, whatever its length (the
        loop only appends, so the view never changes)."""
        return Conversation(self._messages)

    @property
    def turns(self) -> int:
        return self._turns

    def steer(self, message: str) -> None:
        """Queue a user message; it is injected after the current tool call finishes.

        Calls still pending from the same reply are then skipped (each gets an error result),
        so the model reads the message before doing anything else. Before ``run()`` starts, the
        message is queued and follows the task.
        """
        if not isinstance(message, str) or not message.strip():
            raise InvalidRequest(
                "a steering message must be a non-empty string", run_id=self.run_id
            )
        if self._state == "done":
            raise InvalidRequest(
                f"run {self.run_id!r} has finished; steering reaches only a running child",
                run_id=self.run_id,
            )
        if self._steering is None:
            self._steering = deque()
        self._steering.append(message)

    def notify(self, message: str, *, on_delivered: Callable[[], None] | None = None) -> bool:
        """Queue a runtime notice for the next turn boundary (before the next model request).

        Unlike ``steer()``, the calls still pending from the current reply all run first, and
        a notice does not keep a run going: ``False`` once the run has ended, and a notice
        still queued when the model gives its final answer is dropped. ``on_delivered`` is
        called (synchronously, and must not raise) right after the notice has joined the
        conversation; it is never called for a dropped notice.
        """
        if not isinstance(message, str) or not message.strip():
            raise InvalidRequest("a notice must be a non-empty string", run_id=self.run_id)
        if self._state == "done":
            return False
        if self._notices is None:
            self._notices = deque()
        self._notices.append((message, on_delivered))
        return True

    def withdraw(self, on_delivered: Callable[[], None]) -> bool:
        """Drop the queued notice that ``notify`` was given ``on_delivered`` for, unless it has
        joined the conversation already (then ``False``)."""
        notices = self._notices
        for entry in notices or ():
            if entry[1] is on_delivered:
                assert notices is not None
                notices.remove(entry)
                return True
        return False

    def stop(self) -> None:
        """End the run with status ``stopped``; a stop before ``run()`` means it never starts."""
        self._stop_requested = True
        if self._cancel is not None:
            self._cancel.cancel()

    async def run(self) -> ChildOutcome:
        """Run until a final answer, a stop or the turn limit; never raises a ``MembraneError``
        for the run's own failures (they become status ``error``)."""
        if self._state != "new":
            raise InvalidRequest(
                "an AgentLoop runs once; to continue, start a new one with the prior messages",
                run_id=self.run_id,
            )
        self._state = "running"
        self._messages = list(self._messages)
        if self._stop_requested:
            self._state = "done"
            return self._result("stopped")
        # One frame for the run, its cancel scope and its errors (each coroutine in the chain
        # is one more object per waiting child for the collector to follow).
        try:
            outcome: ChildOutcome | None = None
            try:
                with anyio.CancelScope() as cancel:
                    self._cancel = cancel
                    outcome = await self._drive()
            except MembraneError as exc:
                outcome = self._result("error", error=exc)
            finally:
                self._cancel = None
            result = self._result("stopped") if outcome is None else outcome
        except BaseException as exc:
            status = "cancelled" if isinstance(exc, anyio.get_cancelled_exc_class()) else "error"
            await self._shutdown(status)
            raise
        finally:
            self._state = "done"
        failures = await self._shutdown(result.status)
        if failures and result.status in OK_STATES:
            result = self._result("error", error=failures[0])
        self._release(result)
        return result

    def _release(self, result: ChildOutcome) -> None:
        """Let go of what only a running loop needs once it has ended: nothing is emitted any
        more."""
        self._emit = _ignore

    async def _drive(self) -> ChildOutcome:
        hooks = self._hooks
        extra: Sequence[str] = ()
        if hooks is not None:
            await hooks.session_start(SessionStart(self.agent, self.run_id, self._resumed))
            event = BeforeAgentStart(self.agent, self.run_id, self._task, self._system)
            event = await hooks.before_agent_start(event)
            self._system, extra = event.system_prompt, event.messages
        gate = self._scope.call_gate
        commands = gate.hooks if isinstance(gate, CommandHookGate) else None
        if self._task:
            if commands is not None:
                extra = [*extra, *await commands.prompt_submitted(self._task, self._context)]
            await self._add_user_message(self._task)
        for text in extra:
            if text:
                self._messages.append(Message(role="user", content=text))
        limit = self._max_turns
        last_turn = None if limit is None else limit + self._grace_turns
        wrapping_up = False
        retries = 0
        stop_refused = False
        while True:
            while self._steering:
                await self._add_user_message(self._steering.popleft())
            while self._notices:
                notice, delivered = self._notices.popleft()
                self._messages.append(Message(role="user", content=notice))
                if delivered is not None:
                    delivered()
            if self._spending is not None:
                self._spending.before_turn()
            self._turns += 1
            turn = self._turns
            self._emit("turn", {"turn": turn})
            if self._barrier is not None and turn > 1:
                await self._barrier()
            request, name = self._model_request(), self._model_label
            try:
                response = await self._model.request(request)
            except MembraneError:
                raise
            except Exception as exc:
                raise ModelError(
                    f"the model {name!r} failed: {type(exc).__name__}: {exc}", model=name
                ) from exc
            response = self._received(response)
            reply = response.message()
            self._messages.append(reply)
            self._text = response.text
            final_turn = last_turn is not None and turn >= last_turn
            if not response.tool_calls:
                if response.stop_reason == "length" and not response.text.strip():
                    raise ModelError(
                        f"the model {self._model_label!r} hit its length limit without any text",
                        model=self._model_label,
                        stop_reason="length",
                    )
                if hooks is not None:
                    await hooks.turn_end(TurnEnd(self.agent, self.run_id, turn, reply, ()))
                # A steering message that arrived while the model answered keeps the run going.
                if not self._steering or final_turn:
                    value, problem = parse_final(self._validator, response.text)
                    # A SubagentStop command hook may send the child back to work, with a reason.
                    why = None
                    if problem is None and commands is not None and not final_turn:
                        why = await commands.stop_refused(self._context, active=stop_refused)
                    if why is not None:
                        stop_refused = True
                        self._messages.append(Message(role="user", content=_stop_note(why)))
                    elif problem is None:
                        status: EndStatus = "wrapped_up" if wrapping_up else "completed"
                        return self._result(status, structured=value)
                    else:
                        retries += 1
                        if retries > self._max_output_retries or final_turn:
                            raise StructuredOutputInvalid(
                                "the final answer does not match the response schema: "
                                f"{problem[1]}",
                                path=problem[0],
                                reason=problem[1],
                            )
                        self._messages.append(Message(role="user", content=_correction(problem)))
            else:
                results = await self._run_calls(turn, response.tool_calls, run=not final_turn)
                if hooks is not None:
                    await hooks.turn_end(TurnEnd(self.agent, self.run_id, turn, reply, results))
                if final_turn:
                    return self._result("aborted")
            if limit is not None and turn >= limit and not wrapping_up:
                wrapping_up = True
                wrap_up = WRAP_UP_MESSAGE.format(grace=self._grace_turns)
                self._messages.append(Message(role="user", content=wrap_up))

    def _model_request(self) -> ModelRequest:
        """The next request to the model: the conversation and the tools in view now."""
        view = self._scope.view()
        tools = view.wire_schemas()
        return ModelRequest(
            agent=self.agent,
            run_id=self.run_id,
            system=self._system,
            messages=Conversation(self._messages),
            tools=tools,
            model=self._model_name,
            thinking=self._thinking,
            response_schema=self._schema,
            tool_choice=self._turn_tool_choice(tools),
        )

    def _turn_tool_choice(self, tools: Sequence[Mapping[str, Any]]) -> str | None:
        """This turn's ``tool_choice``: the definition's until the run's first tool call (then
        none, the provider's default ``auto``, so the agent can answer), and only while the
        turn offers tools (a named tool: while it is offered)."""
        choice = self._tool_choice
        if choice is None or self._tools_called or not tools:
            return None
        if choice in TOOL_CHOICE_MODES or any(tool["name"] == choice for tool in tools):
            return choice
        return None

    def _received(self, response: ModelResponse) -> ModelResponse:
        """The model's ``response`` checked (``checked_response``), counted and reported."""
        name = self._model_label
        response, problems = checked_response(response, model=name)
        self._malformed.update(problems)
        self._usage = self._usage + response.usage
        usage = response.usage.to_dict()
        for attempt in response.failed_attempts:
            # A model of a fallback chain that failed before another answered.
            self._emit("model_attempt_failed", {"turn": self._turns, **attempt})
        answered = response.answered_by or name
        data: dict[str, Any] = {"turn": self._turns, "model": answered, **usage}
        cost = self._priced(answered, response.usage)
        # Dollars at the model's price; ``null`` when the price is unknown, never 0.
        data["cost"] = None if cost is None else cost / 1_000_000
        self._emit("usage", {**data, **_said(response)})
        for note in response.notes:
            self._emit("model_note", {"turn": self._turns, "note": note})
        if self._spending is not None:
            self._spending.after_response(response.usage, model=answered)
        if response.stop_reason == "error":
            raise ModelError(
                f"the model {name!r} stopped with an error", model=name, stop_reason="error"
            )
        return response

    async def _run_calls(
        self, turn: int, calls: Sequence[ToolCall], *, run: bool
    ) -> tuple[Message, ...]:
        """Answer the turn's ``calls``, in the order the model wrote them.

        They run concurrently, a writing call waiting only for the earlier calls it could
        collide with (``membrane.loop.overlap``). Each is checked in order first: unreadable
        arguments and a budget it would cross answer it unrun (the budget ends the run once the
        calls before it are answered). A steer skips the calls that have not started yet.
        """
        if calls:
            self._tools_called = True
        answers: list[Message | None] = [None] * len(calls)
        planned: list[int] = []
        refused: BudgetExceeded | None = None
        for index, call in enumerate(calls):
            self._emit("tool_call", {"name": call.name, "id": call.id, "turn": turn})
            problem = self._malformed.pop(call.id, None)
            answer: Message | None = None
            if problem is not None:
                message = f"The call was not run: {problem}."
                answer = error_result(call, "tool-arguments-invalid", message)
            elif not run:
                answer = error_result(call, SKIPPED, _NOT_RUN)
            elif (refused := self._refused_call()) is not None:
                answer = error_result(call, refused.code, f"The call was not run: {refused}")
            else:
                planned.append(index)
                continue
            answers[index] = answer
            self._emit("tool_result", result_event(call, answer))
            if refused is not None:
                calls = calls[: index + 1]
                break
        try:
            if len(planned) == 1:
                answers[planned[0]] = await self._run_one(turn, calls[planned[0]])
            elif planned:
                await self._run_together(turn, calls, planned, answers)
        finally:
            # In the model's order, whatever ended the turn: a stop answers what it interrupted.
            for index, call in enumerate(calls):
                answer = answers[index]
                self._messages.append(
                    answer if answer is not None else error_result(call, SKIPPED, _STOPPED)
                )
        if refused is not None:
            raise refused
        return tuple(cast(list[Message], answers[: len(calls)]))

    async def _run_one(self, turn: int, call: ToolCall) -> Message:
        answer = await run_tool_call(
            self._scope,
            call,
            self._context,
            hooks=self._hooks,
            agent=self.agent,
            run_id=self.run_id,
            turn=turn,
            emit=self._emit,
        )
        self._emit("tool_result", result_event(call, answer))
        return answer

    async def _run_together(
        self,
        turn: int,
        calls: Sequence[ToolCall],
        planned: Sequence[int],
        answers: list[Message | None],
    ) -> None:
        """Run the ``planned`` calls at once, each writing call after the earlier ones it could
        collide with; a call that waited and finds a steer arrived is skipped."""
        view = self._scope.view()
        cwd = self._context.cwd
        claims = {
            i: claim(
                view.get(calls[i].name) if calls[i].name in view else None, calls[i].arguments, cwd
            )
            for i in planned
        }
        done = {i: anyio.Event() for i in planned}

        async def one(index: int) -> None:
            call = calls[index]
            try:
                earlier = [j for j in planned if j < index and conflict(claims[j], claims[index])]
                for j in earlier:
                    await done[j].wait()
                if earlier and self._steering:
                    skipped = error_result(call, SKIPPED, _SKIPPED)
                    answers[index] = skipped
                    self._emit("tool_result", result_event(call, skipped))
                    return
                answers[index] = await self._run_one(turn, call)
            finally:
                done[index].set()

        async with anyio.create_task_group() as group:
            for index in planned:
                group.start_soon(one, index)

    def _refused_call(self) -> BudgetExceeded | None:
        """Why the next call may not run (a budget it would cross), or ``None``."""
        if self._spending is None:
            return None
        try:
            self._spending.before_tool_call()
        except BudgetExceeded as exc:
            return exc
        return None

    async def _add_user_message(self, text: str) -> None:
        if parse_mention(text) is None:  # most messages: no mention clone to ask
            self._messages.append(Message(role="user", content=text))
            return
        delegation = await delegate_mention(
            self._model,
            self._scope,
            self._messages,
            self._system,
            text,
            context=self._context,
            model_name=self._model_name,
            thinking=self._thinking,
            turn=self._turns + 1,
            emit=self._emit,
        )
        if delegation is None:
            self._messages.append(Message(role="user", content=text))
            return
        self._usage = self._usage + delegation.usage
        self._priced(self._model_label, delegation.usage)
        usage = delegation.usage.to_dict()
        self._emit("usage", {"turn": self._turns + 1, "mention": True, **usage})
        self._messages.extend(delegation.messages)
        if self._spending is not None:
            self._spending.after_response(delegation.usage, model=self._model_label)

    async def _shutdown(self, status: str) -> list[MembraneError]:
        if self._hooks is None:
            return []
        event = SessionShutdown(self.agent, self.run_id, status)
        with anyio.move_on_after(SHUTDOWN_TIMEOUT, shield=True):
            return list(await self._hooks.session_shutdown(event))
        return []

    def _answer_pending_calls(self) -> None:
        """Answer calls a stop interrupted, so the transcript stays well formed for a resume."""
        for index in range(len(self._messages) - 1, -1, -1):
            if self._messages[index].role == "assistant":
                break
        else:
            return
        answered = {m.tool_call_id for m in self._messages[index + 1 :] if m.role == "tool"}
        for call in self._messages[index].tool_calls:
            if call.id not in answered:
                self._messages.append(error_result(call, SKIPPED, _STOPPED))

    def _priced(self, model: str | None, usage: Usage) -> int | None:
        """What one response of ``model`` cost (micro-dollars, ``None``: no known price),
        added to the run's cost, which stays unknown once one response's price was."""
        cost = None if self._price is None else self._price(model, usage)
        self._cost = None if cost is None or self._cost is None else self._cost + cost
        return cost

    def _result(
        self, status: EndStatus, *, error: MembraneError | None = None, structured: Any = None
    ) -> ChildOutcome:
        if status == "stopped" or (error is not None and error.code == BudgetExceeded.code):
            self._answer_pending_calls()
        return ChildOutcome(
            status=status,
            text=self._text,
            turns=self._turns,
            usage=self._usage,
            cost=self._cost,
            error=None if error is None else error.to_dict(),
            structured=structured,
            messages=Conversation(self._messages),
        )


def _said(response: ModelResponse) -> dict[str, str]:
    """What the provider said of ``response`` (its id, model and finish reason), for events."""
    said = {
        "response_id": response.response_id,
        "response_model": response.response_model,
        "finish_reason": response.finish_reason,
    }
    return {key: value for key, value in said.items() if value is not None}


def _stop_note(reason: str) -> str:
    """The message that sends a child back to work when a ``SubagentStop`` hook blocks."""
    return f"Do not stop yet: the agent's SubagentStop hook says: {reason}"


def _correction(problem: tuple[str, str]) -> str:
    where, reason = problem
    return (
        "Your final answer must be only a JSON value that validates against the response "
        f"schema. Problem at {where}: {reason}. Reply again with the corrected JSON and "
        "nothing else."
    )
