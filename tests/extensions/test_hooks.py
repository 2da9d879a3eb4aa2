"""Extension lifecycle hooks: Pi's order, prompt changes, failures and every exit path."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane.errors import ExtensionError
from membrane.extensions import load as loader
from membrane.extensions.hooks import (
    BeforeAgentStart,
    ExtensionHooks,
    SessionShutdown,
    TurnEnd,
)
from membrane.loop.agent_loop import AgentLoop
from membrane.loop.outcome import ChildOutcome
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.testing import FunctionModel
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext
from membrane.vocabulary import HOOK_EVENTS

pytestmark = pytest.mark.anyio


async def _echo(arguments: Mapping[str, Any], context: ToolContext) -> str:
    return "ran"


READ = Tool(name="Read", description="read", input_schema={"type": "object"}, handler=_echo)


def replay(*responses: ModelResponse) -> FunctionModel:
    queue = list(responses)

    async def answer(request: ModelRequest) -> ModelResponse:
        return queue.pop(0)

    return FunctionModel(answer)


def read_call() -> ModelResponse:
    return ModelResponse(tool_calls=(ToolCall(id="c1", name="Read", arguments={}),))


def make_loop(model: FunctionModel, hooks: ExtensionHooks, **options: Any) -> AgentLoop:
    registry = ToolRegistry()
    registry.register(READ)
    return AgentLoop(
        model=model,
        scope=Scope(registry, name="child"),
        agent="child",
        run_id="run-1",
        system="base prompt",
        task="work",
        context=ToolContext(),
        max_turns=options.pop("max_turns", 10),
        hooks=hooks,
        **options,
    )


class Journal:
    """Hooks that record which events arrived, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.hooks = ExtensionHooks()
        for event in HOOK_EVENTS:
            self.hooks.add("journal", event, self._recorder(event))

    def _recorder(self, name: str) -> Any:
        def record(event: Any) -> None:
            detail = f":{event.turn}" if isinstance(event, TurnEnd) else ""
            if isinstance(event, SessionShutdown):
                detail = f":{event.status}"
            self.seen.append(name + detail)

        return record


def test_every_hook_event_registers_and_any_other_is_refused_the_same_way() -> None:
    api = loader.ExtensionAPI("journal", ToolRegistry().extension("journal"))
    hooks = ExtensionHooks()
    for event in HOOK_EVENTS:
        api.on(event, print)
        hooks.add("journal", event, print)
    assert set(api._hooks) == set(HOOK_EVENTS)
    with pytest.raises(ExtensionError) as by_api:
        api.on("turn_ended", print)
    with pytest.raises(ExtensionError) as by_hooks:
        hooks.add("journal", "turn_ended", print)
    assert by_api.value.message == by_hooks.value.message
    assert "did you mean 'turn_end'?" in by_api.value.message


async def test_events_arrive_in_pis_order() -> None:
    journal = Journal()
    result = await make_loop(replay(read_call(), ModelResponse(text="done")), journal.hooks).run()
    assert result.status == "completed"
    assert journal.seen == [
        "session_start",
        "before_agent_start",
        "before_tool_call",
        "turn_end:1",
        "turn_end:2",
        "session_shutdown:completed",
    ]


async def test_hooks_from_a_real_extension_dispatch_sync_and_async_handlers(
    tmp_path: Path,
) -> None:
    folder = tmp_path / ".membrane" / "extensions"
    folder.mkdir(parents=True)
    (folder / "foo.py").write_text(
        textwrap.dedent(
            """
            SEEN = []

            def setup(ext):
                ext.on("session_start", lambda event: SEEN.append("start"))

                async def prompt(event):
                    SEEN.append("before")
                    return event.system_prompt + " + foo guidance"

                ext.on("before_agent_start", prompt)
                ext.on("session_shutdown", lambda event: SEEN.append("shutdown:" + event.status))
            """
        )
    )
    registry = ToolRegistry()
    source = loader.discover_extensions(tmp_path, installed=False)["foo"]
    extension = loader.load_extension(source, registry)
    model = replay(ModelResponse(text="done"))
    await make_loop(model, ExtensionHooks.from_extensions([extension])).run()
    assert model.requests[0].system == "base prompt + foo guidance"
    module = extension.hooks["session_start"][0].__globals__
    assert module["SEEN"] == ["start", "before", "shutdown:completed"]


async def test_before_agent_start_handlers_chain_by_return_value_mapping_and_mutation() -> None:
    hooks = ExtensionHooks()
    hooks.add("a", "before_agent_start", lambda event: event.system_prompt + " [a]")

    async def by_mapping(event: BeforeAgentStart) -> dict[str, str]:
        return {"system_prompt": event.system_prompt + " [b]", "message": "extra context"}

    def by_mutation(event: BeforeAgentStart) -> None:
        event.system_prompt += " [c]"

    hooks.add("b", "before_agent_start", by_mapping)
    hooks.add("c", "before_agent_start", by_mutation)
    model = replay(ModelResponse(text="done"))
    await make_loop(model, hooks).run()
    request = model.requests[0]
    assert request.system == "base prompt [a] [b] [c]"
    assert [m.content for m in request.messages] == ["work", "extra context"]


async def test_a_before_agent_start_result_of_the_wrong_type_fails_the_run() -> None:
    hooks = ExtensionHooks()
    hooks.add("odd", "before_agent_start", lambda event: 42)
    result = await make_loop(replay(), hooks).run()
    assert result.status == "error"
    assert result.error is not None
    assert result.error["code"] == "extension-hook-failed"
    assert result.error["data"]["extension"] == "odd"


@pytest.mark.parametrize("event", ["session_start", "before_agent_start", "turn_end"])
async def test_a_raising_lifecycle_hook_is_an_error_naming_the_extension(event: str) -> None:
    journal = Journal()

    def explode(_: object) -> None:
        raise KeyError("missing config")

    journal.hooks.add("flaky", event, explode)
    result = await make_loop(replay(ModelResponse(text="done")), journal.hooks).run()
    assert result.status == "error"
    assert result.error is not None
    assert result.error["code"] == "extension-hook-failed"
    assert result.error["data"]["extension"] == "flaky"
    assert result.error["data"]["event"] == event
    assert "'flaky'" in result.error["message"] and "KeyError" in result.error["message"]
    assert journal.seen[-1] == "session_shutdown:error"


async def test_a_raising_before_call_hook_blocks_that_call_and_the_run_goes_on() -> None:
    hooks = ExtensionHooks()

    async def broken(event: object) -> None:
        raise RuntimeError("policy server down")

    hooks.add("policy", "before_tool_call", broken)
    result = await make_loop(replay(read_call(), ModelResponse(text="done")), hooks).run()
    tool = next(m for m in result.messages if m.role == "tool")
    assert tool.is_error and "tool-blocked" in tool.content and "policy server down" in tool.content
    assert result.status == "completed"


async def test_a_raising_shutdown_hook_turns_a_success_into_an_error() -> None:
    hooks = ExtensionHooks()
    seen: list[str] = []
    hooks.add("bad", "session_shutdown", lambda event: 1 / 0)
    hooks.add("good", "session_shutdown", lambda event: seen.append("good ran"))
    result = await make_loop(replay(ModelResponse(text="done")), hooks).run()
    assert seen == ["good ran"]
    assert result.status == "error"
    assert result.error is not None and result.error["data"]["extension"] == "bad"


async def test_a_raising_shutdown_hook_keeps_an_earlier_failure_as_the_result() -> None:
    hooks = ExtensionHooks()
    hooks.add("bad", "session_shutdown", lambda event: 1 / 0)
    result = await make_loop(replay(ModelResponse(stop_reason="error")), hooks).run()
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "model-error"


async def test_session_shutdown_runs_when_the_model_fails() -> None:
    journal = Journal()

    async def fail(request: ModelRequest) -> ModelResponse:
        raise TimeoutError("read timed out")

    result = await make_loop(FunctionModel(fail), journal.hooks).run()
    assert result.status == "error"
    assert journal.seen[-1] == "session_shutdown:error"


async def test_session_shutdown_runs_when_the_turn_limit_aborts() -> None:
    journal = Journal()
    model = replay(read_call(), read_call())
    result = await make_loop(model, journal.hooks, max_turns=1, grace_turns=1).run()
    assert result.status == "aborted"
    assert journal.seen[-1] == "session_shutdown:aborted"


async def _hang(request: ModelRequest) -> ModelResponse:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def test_session_shutdown_runs_on_cancellation_and_cancellation_propagates() -> None:
    journal = Journal()
    shutdown_done = anyio.Event()

    async def slow_shutdown(event: SessionShutdown) -> None:
        await anyio.sleep(0)  # an async handler still runs inside the cancelled task
        shutdown_done.set()

    journal.hooks.add("slow", "session_shutdown", slow_shutdown)
    loop = make_loop(FunctionModel(_hang), journal.hooks)
    outcome: list[ChildOutcome] = []

    async def drive() -> None:
        outcome.append(await loop.run())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(drive)
            await anyio.wait_all_tasks_blocked()
            group.cancel_scope.cancel()
    assert outcome == []
    assert shutdown_done.is_set()
    assert "session_shutdown:cancelled" in journal.seen


async def test_session_shutdown_runs_when_the_host_stops_the_run() -> None:
    journal = Journal()
    loop = make_loop(FunctionModel(_hang), journal.hooks)
    outcome: list[ChildOutcome] = []

    async def drive() -> None:
        outcome.append(await loop.run())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(drive)
            await anyio.wait_all_tasks_blocked()
            loop.stop()
    assert outcome[0].status == "stopped"
    assert journal.seen[-1] == "session_shutdown:stopped"


def test_an_unknown_event_or_handler_is_rejected() -> None:
    hooks = ExtensionHooks()
    with pytest.raises(ExtensionError) as caught:
        hooks.add("foo", "turn-end", lambda event: None)
    assert "turn-end" in caught.value.message and caught.value.code == "extension-invalid"
    with pytest.raises(ExtensionError):
        hooks.add("foo", "turn_end", "not callable")  # type: ignore[arg-type]


def test_empty_hooks_are_falsy_and_list_their_handlers_in_order() -> None:
    hooks = ExtensionHooks()
    assert not hooks

    def first(event: object) -> None:
        return None

    def second(event: object) -> None:
        return None

    hooks.add("a", "turn_end", first)
    hooks.add("b", "turn_end", second)
    assert hooks
    assert hooks.handlers("turn_end") == (("a", first), ("b", second))
