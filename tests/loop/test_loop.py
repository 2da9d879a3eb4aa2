"""The agent loop: turns, calls through the live view, statuses, turn limits and steering."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import pytest

from membrane.errors import InvalidRequest
from membrane.loop.agent_loop import WRAP_UP_MESSAGE, AgentLoop
from membrane.loop.outcome import ChildOutcome
from membrane.models.base import Message, ModelRequest, ModelResponse, ToolCall, Usage
from membrane.testing import FunctionModel, ScriptedModel
from membrane.tools.registry import ToolRegistry
from membrane.tools.restriction import Restriction
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext

pytestmark = pytest.mark.anyio

OBJECT = {"type": "object", "properties": {}}


def make_tool(
    name: str,
    handler: Callable[[Mapping[str, Any], ToolContext], Awaitable[Any]] | None = None,
    *,
    schema: Mapping[str, Any] = OBJECT,
    sequential: bool = False,
) -> Tool:
    async def echo(arguments: Mapping[str, Any], context: ToolContext) -> str:
        return f"{name} ran"

    return Tool(
        name=name,
        description=f"the {name} tool",
        input_schema=schema,
        handler=handler or echo,
        sequential=sequential,
    )


def call(name: str, call_id: str = "c1", **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def calls(*names: str) -> ModelResponse:
    return ModelResponse(
        tool_calls=tuple(call(n, f"c{i}") for i, n in enumerate(names)), stop_reason="tool_calls"
    )


def final(text: str = "done", **fields: Any) -> ModelResponse:
    return ModelResponse(text=text, **fields)


def replay(*responses: ModelResponse) -> FunctionModel:
    """A model that answers each request with the next response."""
    queue = list(responses)

    async def answer(request: ModelRequest) -> ModelResponse:
        return queue.pop(0)

    return FunctionModel(answer)


def tool_names(request: ModelRequest) -> set[str]:
    return {entry["name"] for entry in request.tools}


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, kind: str, data: Mapping[str, Any]) -> None:
        self.events.append((kind, dict(data)))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [data for k, data in self.events if k == kind]


def make_loop(
    model: Any,
    scope: Scope | None = None,
    *,
    task: str = "do the task",
    max_turns: int | None = 10,
    **options: Any,
) -> AgentLoop:
    if scope is None:
        scope = Scope(ToolRegistry(), name="child")
    return AgentLoop(
        model=model,
        scope=scope,
        agent="child",
        run_id="run-1",
        system="you are a child",
        task=task,
        context=ToolContext(agent="child", run_id="run-1"),
        max_turns=max_turns,
        **options,
    )


def error_of(message: Message) -> dict[str, Any]:
    assert message.is_error, message
    return json.loads(message.content)["error"]  # type: ignore[no-any-return]


def tool_messages(result: ChildOutcome) -> list[Message]:
    return [m for m in result.messages if m.role == "tool"]


@pytest.fixture
def registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(make_tool("Read"))
    return registry


async def test_final_answer_completes_with_text_turns_and_summed_usage(
    registry: ToolRegistry,
) -> None:
    model = replay(
        ModelResponse(tool_calls=(call("Read"),), usage=Usage(10, 2)),
        final("all done", usage=Usage(5, 3)),
    )
    recorder = Recorder()
    result = await make_loop(model, Scope(registry, name="child"), emit=recorder).run()
    assert (result.status, result.text, result.turns) == ("completed", "all done", 2)
    assert result.usage == Usage(15, 5)
    assert [(e["turn"], e["input_tokens"], e["output_tokens"]) for e in recorder.of("usage")] == [
        (1, 10, 2),
        (2, 5, 3),
    ]
    assert result.error is None
    first = model.requests[0]
    assert first.system == "you are a child"
    assert first.messages == (Message(role="user", content="do the task"),)
    assert tool_names(first) == {"Read"}
    assert tool_messages(result)[0].content == "Read ran"


async def test_events_pair_every_tool_call_with_one_result(registry: ToolRegistry) -> None:
    recorder = Recorder()
    model = replay(calls("Read", "Forged"), final())
    await make_loop(model, Scope(registry, name="child"), emit=recorder).run()
    # Every call of the turn is announced before any runs; the two then run at once.
    kinds = recorder.kinds()
    assert kinds[:4] == ["turn", "usage", "tool_call", "tool_call"]
    assert sorted(kinds[4:7]) == ["tool_result", "tool_result", "vetoed_call"]
    assert kinds[7:] == ["turn", "usage"]
    assert recorder.of("turn") == [{"turn": 1}, {"turn": 2}]
    assert recorder.of("tool_call")[0] == {"name": "Read", "id": "c0", "turn": 1}
    assert sorted(recorder.of("tool_result"), key=lambda data: data["id"]) == [
        {"name": "Read", "id": "c0", "is_error": False},
        {"name": "Forged", "id": "c1", "is_error": True, "code": "tool-not-visible"},
    ]
    assert recorder.of("vetoed_call") == [
        {"name": "Forged", "id": "c1", "code": "tool-not-visible"}
    ]


async def test_a_call_to_a_hidden_tool_names_only_the_requested_tool() -> None:
    registry = ToolRegistry()
    registry.register(make_tool("Read"))
    registry.register(make_tool("SecretAdmin"))
    scope = Scope(registry, name="child")
    scope.restrict(Restriction(allow=["Read"]))
    result = await make_loop(replay(calls("SecretAdmin"), final()), scope).run()
    vetoed = tool_messages(result)[0]
    assert error_of(vetoed)["code"] == "tool-not-visible"
    assert "SecretAdmin" in vetoed.content
    assert "Read" not in vetoed.content
    assert result.status == "completed"


async def test_invalid_arguments_give_an_error_result_with_the_json_path() -> None:
    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }
    registry.register(make_tool("Read", schema=schema))
    model = replay(ModelResponse(tool_calls=(call("Read", path=3),)), final())
    result = await make_loop(model, Scope(registry, name="child")).run()
    error = error_of(tool_messages(result)[0])
    assert error["code"] == "tool-arguments-invalid"
    assert error["path"] == "$.path"
    assert result.status == "completed"


async def test_a_failing_handler_becomes_an_error_result_and_the_loop_goes_on() -> None:
    async def broken(arguments: Mapping[str, Any], context: ToolContext) -> str:
        raise RuntimeError("disk on fire")

    registry = ToolRegistry()
    registry.register(make_tool("Read", broken))
    model = replay(calls("Read"), final("recovered"))
    result = await make_loop(model, Scope(registry, name="child")).run()
    error = error_of(tool_messages(result)[0])
    assert error["code"] == "tool-failed"
    assert "disk on fire" in error["message"]
    assert (result.status, result.text) == ("completed", "recovered")


async def test_the_context_reaches_the_handler_and_values_are_rendered_as_json() -> None:
    seen: list[ToolContext] = []

    async def handler(arguments: Mapping[str, Any], context: ToolContext) -> dict[str, int]:
        seen.append(context)
        return {"matches": 2}

    registry = ToolRegistry()
    registry.register(make_tool("Grep", handler))
    result = await make_loop(replay(calls("Grep"), final()), Scope(registry, name="c")).run()
    assert seen[0].run_id == "run-1"
    assert json.loads(tool_messages(result)[0].content) == {"matches": 2}


async def test_each_request_offers_the_live_view_of_that_moment(registry: ToolRegistry) -> None:
    async def add_write(arguments: Mapping[str, Any], context: ToolContext) -> str:
        registry.register(make_tool("Write"))
        registry.remove("Read")
        return "changed"

    registry.register(make_tool("Change", add_write))
    model = replay(calls("Change"), calls("Read"), final())
    result = await make_loop(model, Scope(registry, name="child")).run()
    assert tool_names(model.requests[0]) == {"Read", "Change"}
    assert tool_names(model.requests[1]) == {"Write", "Change"}
    assert error_of(tool_messages(result)[1])["code"] == "tool-not-visible"


# -- statuses -----------------------------------------------------------------------------


async def test_a_provider_error_is_status_error_not_an_empty_success() -> None:
    model = ScriptedModel({"agents": {"child": [{"error": "upstream 503"}]}})
    result = await make_loop(model).run()
    assert result.status == "error"
    assert result.error is not None
    assert result.error["code"] == "model-error"
    assert "upstream 503" in result.error["message"]


async def test_a_model_raising_a_foreign_exception_is_a_model_error() -> None:
    async def boom(request: ModelRequest) -> ModelResponse:
        raise ConnectionResetError("peer went away")

    result = await make_loop(FunctionModel(boom)).run()
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "model-error"
    assert "ConnectionResetError" in result.error["message"]


async def test_a_final_stop_for_an_error_is_status_error() -> None:
    result = await make_loop(replay(final("partial", stop_reason="error"))).run()
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "model-error"


async def test_a_length_stop_with_no_text_is_status_error() -> None:
    result = await make_loop(replay(final("  ", stop_reason="length"))).run()
    assert result.status == "error"
    assert result.error is not None and result.error["data"]["stop_reason"] == "length"


async def test_a_length_stop_with_text_completes_with_that_text() -> None:
    result = await make_loop(replay(final("truncated but useful", stop_reason="length"))).run()
    assert (result.status, result.text) == ("completed", "truncated but useful")


async def test_a_script_that_runs_out_of_turns_is_status_error() -> None:
    model = ScriptedModel({"agents": {"child": [{"tool_calls": [{"name": "Read"}]}]}})
    result = await make_loop(model).run()
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "model-script-invalid"


async def test_stop_ends_a_running_loop_with_status_stopped() -> None:
    entered = anyio.Event()

    async def hang(request: ModelRequest) -> ModelResponse:
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    loop = make_loop(FunctionModel(hang))
    results: list[ChildOutcome] = []

    async def drive() -> None:
        results.append(await loop.run())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(drive)
            await entered.wait()
            loop.stop()
    assert results[0].status == "stopped"
    assert results[0].turns == 1


async def test_stop_before_run_means_no_request_is_made() -> None:
    model = replay(final())
    loop = make_loop(model)
    loop.stop()
    result = await loop.run()
    assert (result.status, result.turns, model.requests) == ("stopped", 0, [])


async def test_cancelling_the_task_propagates_instead_of_becoming_a_status() -> None:
    entered = anyio.Event()

    async def hang(request: ModelRequest) -> ModelResponse:
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    loop = make_loop(FunctionModel(hang))
    finished: list[ChildOutcome] = []

    async def drive() -> None:
        finished.append(await loop.run())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(drive)
            await entered.wait()
            group.cancel_scope.cancel()
    assert finished == []


async def test_a_loop_runs_only_once() -> None:
    loop = make_loop(replay(final()))
    await loop.run()
    with pytest.raises(InvalidRequest):
        await loop.run()


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"max_turns": 0}, "max_turns"),
        ({"max_turns": True}, "max_turns"),
        ({"max_turns": 2.5}, "max_turns"),
        ({"grace_turns": -1}, "grace_turns"),
        ({"max_output_retries": -1}, "max_output_retries"),
    ],
)
def test_bad_limits_are_rejected_naming_the_field(options: dict[str, Any], field: str) -> None:
    merged = {"max_turns": 3, **options}
    with pytest.raises(InvalidRequest) as caught:
        make_loop(replay(), **merged)
    assert caught.value.code == "invalid-request"
    assert field in caught.value.message


def test_a_response_schema_that_is_not_json_schema_is_rejected() -> None:
    with pytest.raises(InvalidRequest) as caught:
        make_loop(replay(), response_schema={"type": "no-such-type"})
    assert "response_schema" in caught.value.message


# -- turn limit and grace turns -----------------------------------------------------------


async def test_turn_limit_wraps_up_then_aborts_after_the_grace_turns() -> None:
    runs: list[str] = []

    async def count(arguments: Mapping[str, Any], context: ToolContext) -> str:
        runs.append("ran")
        return "more"

    registry = ToolRegistry()
    registry.register(make_tool("Read", count))

    async def always_read(request: ModelRequest) -> ModelResponse:
        return ModelResponse(tool_calls=(call("Read", f"c{len(model.requests)}"),))

    model = FunctionModel(always_read)
    result = await make_loop(model, Scope(registry, name="c"), max_turns=2, grace_turns=2).run()
    assert (result.status, result.turns, len(model.requests)) == ("aborted", 4, 4)
    wrap_up = WRAP_UP_MESSAGE.format(grace=2)
    assert Message(role="user", content=wrap_up) not in model.requests[1].messages
    assert model.requests[2].messages[-1] == Message(role="user", content=wrap_up)
    # The calls of the last reply are answered but never run.
    assert len(runs) == 3
    last = result.messages[-1]
    assert last.role == "tool" and last.tool_call_id == "c4"
    assert error_of(last)["code"] == "tool-skipped"


async def test_a_final_answer_during_the_grace_turns_is_status_wrapped_up() -> None:
    model = replay(calls("Read"), final("wrapped up"))
    registry = ToolRegistry()
    registry.register(make_tool("Read"))
    result = await make_loop(model, Scope(registry, name="c"), max_turns=1, grace_turns=3).run()
    assert (result.status, result.text, result.turns) == ("wrapped_up", "wrapped up", 2)


async def test_no_grace_turns_aborts_at_the_limit_without_a_wrap_up_message() -> None:
    model = replay(calls("Read"), calls("Read"))
    result = await make_loop(model, max_turns=2, grace_turns=0).run()
    assert (result.status, result.turns) == ("aborted", 2)
    assert not any(
        m.role == "user" and "turn limit" in m.content for m in model.requests[1].messages
    )


async def test_no_turn_limit_runs_until_the_final_answer() -> None:
    model = replay(*[calls("Read") for _ in range(12)], final())
    result = await make_loop(model, max_turns=None).run()
    assert (result.status, result.turns) == ("completed", 13)


async def test_the_default_grace_is_five_turns() -> None:
    model = replay(*[calls("Read") for _ in range(7)])
    result = await make_loop(model, max_turns=1).run()
    assert (result.status, result.turns) == ("aborted", 6)


# -- steering -----------------------------------------------------------------------------


async def test_a_steer_before_the_run_is_queued_after_the_task() -> None:
    model = replay(final())
    loop = make_loop(model)
    loop.steer("focus on tests")
    await loop.run()
    assert [m.content for m in model.requests[0].messages] == ["do the task", "focus on tests"]


async def test_a_steer_lands_after_the_current_tool_call_and_skips_the_rest() -> None:
    # Sequential tools: the second waits for the first, so the steer lands before it starts.
    ran: list[str] = []
    registry = ToolRegistry()

    async def first(arguments: Mapping[str, Any], context: ToolContext) -> str:
        ran.append("first")
        loop.steer("stop grepping, read README")
        return "first ran"

    async def second(arguments: Mapping[str, Any], context: ToolContext) -> str:
        ran.append("second")
        return "second ran"

    registry.register(make_tool("First", first, sequential=True))
    registry.register(make_tool("Second", second, sequential=True))
    model = replay(calls("First", "Second"), final("ok"))
    recorder = Recorder()
    loop = make_loop(model, Scope(registry, name="c"), emit=recorder)
    result = await loop.run()
    assert ran == ["first"]
    sent = model.requests[1].messages
    assert [m.role for m in sent[-4:]] == ["assistant", "tool", "tool", "user"]
    assert sent[-1].content == "stop grepping, read README"
    assert error_of(sent[-2])["code"] == "tool-skipped"
    assert recorder.of("tool_result")[1]["code"] == "tool-skipped"
    assert result.status == "completed"


async def test_a_steer_that_arrives_with_the_final_answer_gets_another_turn() -> None:
    async def answer(request: ModelRequest) -> ModelResponse:
        if len(model.requests) == 1:
            loop.steer("one more thing")
            return final("first answer")
        return final("second answer")

    model = FunctionModel(answer)
    loop = make_loop(model)
    result = await loop.run()
    assert (result.status, result.text, result.turns) == ("completed", "second answer", 2)
    assert model.requests[1].messages[-1] == Message(role="user", content="one more thing")


async def test_steering_does_not_change_the_status() -> None:
    model = replay(final())
    loop = make_loop(model)
    loop.steer("hurry")
    assert (await loop.run()).status == "completed"


async def test_steering_a_finished_loop_or_with_nothing_is_rejected() -> None:
    loop = make_loop(replay(final()))
    with pytest.raises(InvalidRequest):
        loop.steer("   ")
    await loop.run()
    with pytest.raises(InvalidRequest):
        loop.steer("too late")


# -- structured output --------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"enum": ["pass", "fail"]}},
    "required": ["verdict"],
}


async def test_a_valid_structured_answer_is_parsed() -> None:
    model = replay(final('```json\n{"verdict": "pass"}\n```'))
    result = await make_loop(model, response_schema=SCHEMA).run()
    assert result.status == "completed"
    assert result.structured == {"verdict": "pass"}
    assert model.requests[0].response_schema == SCHEMA


async def test_an_invalid_structured_answer_is_corrected_within_the_budget() -> None:
    model = replay(
        final("I think it passes"), final('{"verdict": "maybe"}'), final('{"verdict": "fail"}')
    )
    result = await make_loop(model, response_schema=SCHEMA).run()
    assert (result.status, result.structured, result.turns) == ("completed", {"verdict": "fail"}, 3)
    assert "not JSON" in model.requests[1].messages[-1].content
    assert "$.verdict" in model.requests[2].messages[-1].content


async def test_a_structured_answer_that_never_validates_is_status_error() -> None:
    model = replay(*[final("nope") for _ in range(3)])
    result = await make_loop(model, response_schema=SCHEMA, max_output_retries=2).run()
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "structured-output-invalid"
    assert result.turns == 3


async def test_a_stop_during_a_tool_call_answers_the_interrupted_calls() -> None:
    entered = anyio.Event()

    async def slow(arguments: Mapping[str, Any], context: ToolContext) -> str:
        entered.set()
        await anyio.sleep_forever()
        return "never"

    registry = ToolRegistry()
    registry.register(make_tool("Slow", slow))
    loop = make_loop(replay(calls("Slow", "Slow")), Scope(registry, name="c"))
    results: list[ChildOutcome] = []

    async def drive() -> None:
        results.append(await loop.run())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(drive)
            await entered.wait()
            loop.stop()
    result = results[0]
    assert result.status == "stopped"
    answers = [m for m in result.messages if m.role == "tool"]
    assert [m.tool_call_id for m in answers] == ["c0", "c1"]
    assert all(error_of(m)["code"] == "tool-skipped" for m in answers)
