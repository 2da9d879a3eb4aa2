"""The calls of one turn run at once; writing calls that could collide wait for each other.

Each test makes the calls depend on each other's progress (a call waits until another has
started), so calls run one after another would wait forever: the bound around each run turns
that into a failure, not a slow pass. No test measures time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from membrane.loop.agent_loop import AgentLoop
from membrane.models.base import Message, ModelRequest, ModelResponse, ToolCall
from membrane.testing import FunctionModel
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext

pytestmark = pytest.mark.anyio

OBJECT: Mapping[str, Any] = {"type": "object", "additionalProperties": True}


def turn_then_done(*calls: ToolCall) -> FunctionModel:
    async def answer(request: ModelRequest) -> ModelResponse:
        if len(model.requests) == 1:
            return ModelResponse(tool_calls=calls, stop_reason="tool_calls")
        return ModelResponse(text="done")

    model = FunctionModel(answer)
    return model


def tool(name: str, handler: Any, *, mutating: bool = False, sequential: bool = False) -> Tool:
    # Built-in origin, as Edit and Write have: a mutating one claims the path it names.
    return Tool(
        name=name,
        description=f"the {name} tool",
        input_schema=OBJECT,
        handler=handler,
        mutating=mutating,
        sequential=sequential,
    )


def make_loop(model: FunctionModel, registry: ToolRegistry) -> AgentLoop:
    return AgentLoop(
        model=model,
        scope=Scope(registry, name="c"),
        agent="child",
        run_id="r1",
        system="you are a child",
        task="do the task",
        context=ToolContext(agent="child", run_id="r1"),
        max_turns=5,
    )


async def run(model: FunctionModel, registry: ToolRegistry) -> list[Message]:
    loop = make_loop(model, registry)
    with anyio.fail_after(10):
        result = await loop.run()
    assert result.status == "completed", result.error
    return [m for m in result.messages if m.role == "tool"]


async def test_three_calls_that_each_wait_for_the_others_to_start_all_finish() -> None:
    started: list[str] = []
    all_started = anyio.Event()

    async def wait_for_all(arguments: Mapping[str, Any], context: ToolContext) -> str:
        started.append(arguments["n"])
        if len(started) == 3:
            all_started.set()
        await all_started.wait()
        return f"call {arguments['n']} done"

    registry = ToolRegistry()
    registry.register(tool("Wait", wait_for_all))
    calls = [ToolCall(f"c{n}", "Wait", {"n": str(n)}) for n in range(3)]
    answers = await run(turn_then_done(*calls), registry)
    # Answered in the model's order, whatever order they finished in.
    assert [(m.tool_call_id, m.content) for m in answers] == [
        (f"c{n}", f"call {n} done") for n in range(3)
    ]


async def test_two_writes_of_one_file_never_overlap_while_other_calls_run_beside_them() -> None:
    order: list[str] = []
    reader_in = anyio.Event()

    async def write(arguments: Mapping[str, Any], context: ToolContext) -> str:
        order.append(f"enter {arguments['tag']}")
        if arguments["tag"] == "first":
            await reader_in.wait()  # the Read runs beside this write
        await anyio.lowlevel.checkpoint()
        order.append(f"exit {arguments['tag']}")
        return "written"

    async def read(arguments: Mapping[str, Any], context: ToolContext) -> str:
        reader_in.set()
        return "read"

    registry = ToolRegistry()
    registry.register(tool("Put", write, mutating=True))
    registry.register(tool("Look", read))
    calls = [
        ToolCall("c0", "Put", {"file_path": "a.txt", "tag": "first"}),
        ToolCall("c1", "Put", {"file_path": "./a.txt", "tag": "second"}),
        ToolCall("c2", "Look", {"file_path": "a.txt"}),
        ToolCall("c3", "Put", {"file_path": "b.txt", "tag": "other"}),
    ]
    answers = await run(turn_then_done(*calls), registry)
    assert [m.tool_call_id for m in answers] == ["c0", "c1", "c2", "c3"]
    # The second write of a.txt starts only once the first has ended (same file, two spellings).
    assert order.index("exit first") < order.index("enter second")
    # b.txt is another file: its write did not wait for a.txt's.
    assert order.index("enter other") < order.index("exit first")


async def test_a_sequential_tool_waits_for_earlier_writes_and_later_writes_wait_for_it() -> None:
    active: list[str] = []
    overlaps: list[tuple[str, ...]] = []

    async def work(arguments: Mapping[str, Any], context: ToolContext) -> str:
        active.append(arguments["tag"])
        if len(active) > 1:
            overlaps.append(tuple(active))
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        active.remove(arguments["tag"])
        return "ok"

    registry = ToolRegistry()
    registry.register(tool("Put", work, mutating=True))
    registry.register(tool("Deploy", work, sequential=True))
    calls = [
        ToolCall("c0", "Put", {"file_path": "a.txt", "tag": "put-a"}),
        ToolCall("c1", "Deploy", {"tag": "deploy"}),
        ToolCall("c2", "Put", {"file_path": "b.txt", "tag": "put-b"}),
    ]
    await run(turn_then_done(*calls), registry)
    assert overlaps == []


async def test_a_steer_skips_the_writes_still_waiting_but_not_the_calls_already_running() -> None:
    ran: list[str] = []
    loop: AgentLoop

    async def first(arguments: Mapping[str, Any], context: ToolContext) -> str:
        loop.steer("change of plan")
        ran.append(arguments["tag"])
        return "ok"

    registry = ToolRegistry()
    registry.register(tool("Put", first, mutating=True))
    calls = (
        ToolCall("c0", "Put", {"file_path": "a.txt", "tag": "a"}),
        ToolCall("c1", "Put", {"file_path": "a.txt", "tag": "again"}),
    )
    model = turn_then_done(*calls)
    loop = make_loop(model, registry)
    with anyio.fail_after(10):
        result = await loop.run()
    assert ran == ["a"]
    answers = [m for m in result.messages if m.role == "tool"]
    assert [m.tool_call_id for m in answers] == ["c0", "c1"]
    assert '"tool-skipped"' in answers[1].content
