"""Durable messages (seed 002's ``messageAgent``): ``runtime.message``, ``TaskMessage``, durable
steering and stopping, each written with its receipt and delivered once through the outbox."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane.cli.app import main
from membrane.errors import InvalidRequest, RequestPending, UnknownRun
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import InProcessProvider, SubagentStartRequest
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel, stored_receipt
from membrane.tools.registry import ToolRegistry
from membrane.tools.spec import Tool, ToolContext

from .conftest import Project

pytestmark = pytest.mark.anyio


def messages_in(texts: list[str]) -> list[str]:
    return [text for text in texts if text.startswith("<agent_message ")]


def hold_tool(entered: anyio.Event, released: anyio.Event) -> Tool:
    async def hold(arguments: Mapping[str, Any], context: ToolContext) -> str:
        entered.set()
        await released.wait()
        return "held"

    return Tool(name="Read", description="Read.", input_schema={"type": "object"}, handler=hold)


def replies(request: ModelRequest) -> int:
    return sum(1 for message in request.messages if message.role == "assistant")


@pytest.fixture
def agents(project: Project) -> Project:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker", tools="Read")
    return project


async def test_a_message_reaches_a_running_child_once_and_a_repeat_replays_it(
    agents: Project, tmp_path: Path
) -> None:
    entered, released = anyio.Event(), anyio.Event()
    agents.registry = ToolRegistry()
    agents.registry.register(hold_tool(entered, released))
    seen: list[list[str]] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        seen.append([m.content for m in request.messages if m.role == "user"])
        if replies(request) == 0:
            return ModelResponse(tool_calls=(ToolCall("c1", "Read", {}),), stop_reason="tool_calls")
        return ModelResponse(text="done")

    store = SQLiteStore(tmp_path / "state.db")
    async with agents.runtime(InProcessProvider(FunctionModel(answer)), store=store) as runtime:
        with anyio.fail_after(20):
            info = await runtime.start(SubagentStartRequest("worker", "work", background=True))
            await entered.wait()
            first = runtime.message(info.run_id, "also check the tests", request_id="m-1")
            again = runtime.message(info.run_id, "also check the tests", request_id="m-1")
            released.set()
            result = await runtime.wait(info.run_id)
    assert result.text == "done"
    assert (first.replayed, again.replayed, again.id) == (False, True, first.id)
    (delivered,) = messages_in(seen[-1])
    assert f'delivery="{first.id}"' in delivered and 'kind="ping"' in delivered
    assert "also check the tests" in delivered
    stored = [str(m["content"]) for m in store.transcript(info.run_id)]
    assert len(messages_in(stored)) == 1
    receipt = stored_receipt(store, "m-1")
    assert receipt is not None and receipt.status == "completed" and receipt.kind == "message"
    assert store.pending_outbox() == []
    store.close()


async def test_task_message_derives_its_request_id_so_an_identical_call_is_sent_once(
    agents: Project, tmp_path: Path
) -> None:
    worker_turns: list[list[str]] = []
    ids: dict[str, str] = {}
    lead_gate = anyio.Event()

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "worker":
            worker_turns.append([m.content for m in request.messages if m.role == "user"])
            if replies(request) == 0:
                await lead_gate.wait()
                return ModelResponse(
                    tool_calls=(ToolCall("w1", "Read", {}),), stop_reason="tool_calls"
                )
            return ModelResponse(text="worker done")
        n = replies(request)
        if n == 0:
            start = ToolCall("t1", "Task", {"agent": "worker", "task": "go", "background": True})
            return ModelResponse(tool_calls=(start,), stop_reason="tool_calls")
        if n == 1:
            ids["worker"] = json.loads(request.messages[-1].content)["run_id"]
            send = {"id": ids["worker"], "message": "use the fast path", "kind": "brief"}
            calls = (ToolCall("m1", "TaskMessage", send), ToolCall("m2", "TaskMessage", send))
            return ModelResponse(tool_calls=calls, stop_reason="tool_calls")
        if n == 2:
            ids["results"] = json.dumps([m.content for m in request.messages[-2:]])
            lead_gate.set()
            wait = ToolCall("w", "TaskWait", {"ids": [ids["worker"]]})
            return ModelResponse(tool_calls=(wait,), stop_reason="tool_calls")
        return ModelResponse(text="lead done")

    store = SQLiteStore(tmp_path / "state.db")
    async with agents.runtime(InProcessProvider(FunctionModel(answer)), store=store) as runtime:
        with anyio.fail_after(20):
            result = await runtime.run(SubagentStartRequest("lead", "lead"))
    assert result.text == "lead done"
    first, second = (json.loads(text) for text in json.loads(ids["results"]))
    assert (first["replayed"], second["replayed"]) == (False, True)
    assert first["delivery"] == second["delivery"] and first["kind"] == "brief"
    assert first["request_id"].startswith("message:")
    delivered = [text for turn in worker_turns for text in messages_in(turn)]
    assert len(set(delivered)) == 1 and 'kind="brief"' in delivered[0]
    assert len(messages_in([str(m["content"]) for m in store.transcript(ids["worker"])])) == 1
    store.close()


async def test_a_message_to_a_stored_run_waits_for_its_resume_and_dead_letters_meanwhile(
    agents: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[list[str]] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        seen.append([m.content for m in request.messages if m.role == "user"])
        return ModelResponse(text="ok")

    db = tmp_path / "state.db"
    model = FunctionModel(answer)
    async with agents.runtime(InProcessProvider(model), store=SQLiteStore(db)) as runtime:
        result = await runtime.run(SubagentStartRequest("worker", "first"))
    agents.settings = dataclasses.replace(agents.settings, outbox_max_attempts=1)
    store = SQLiteStore(db)
    async with agents.runtime(InProcessProvider(model), store=store) as runtime:
        sent = runtime.message(result.run_id, "a note for later", request_id="later")
        # The recipient is not live here: one failed attempt is all this setting allows.
        assert runtime.outbox.step() is None
        assert [dead.id for dead in store.dead_outbox()] == [sent.id]
    store.close()

    args = ["outbox", "list", "--dead", "--json", "--state", str(db)]
    assert main(args) == 0
    (row,) = json.loads(capsys.readouterr().out)["items"]
    assert (row["id"], row["kind"], row["recipient"]) == (sent.id, "ping", result.run_id)
    assert "has ended; resume it to deliver" in row["last_error"]
    # The one attempt the setting allows is listed, as its error says.
    assert row["attempts"] == 1 and "gave up after 1 attempt)" in row["last_error"]
    assert main(["outbox", "retry", str(sent.id), "--json", "--state", str(db)]) == 0
    requeued = json.loads(capsys.readouterr().out)
    assert (requeued["id"], requeued["recipient"], requeued["attempts"]) == (
        sent.id,
        result.run_id,
        0,
    )
    assert main(["outbox", "list", "--json", "--state", str(db)]) == 0
    (row,) = json.loads(capsys.readouterr().out)["items"]
    assert (row["id"], row["attempts"]) == (sent.id, 0)

    store = SQLiteStore(db)
    agents.settings = dataclasses.replace(agents.settings, outbox_max_attempts=10)
    async with agents.runtime(InProcessProvider(model), store=store) as runtime:
        with anyio.fail_after(20):
            await runtime.resume(result.run_id, "continue")
            await runtime.wait(result.run_id)
    (delivered,) = messages_in(seen[-1])
    assert f'delivery="{sent.id}"' in delivered
    assert store.pending_outbox() == [] and store.dead_outbox() == []
    store.close()


async def test_a_receipt_pending_elsewhere_is_request_pending_and_nothing_is_sent(
    agents: Project, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "state.db")
    model = FunctionModel(lambda request: ModelResponse(text="ok"))
    async with agents.runtime(InProcessProvider(model), store=store) as runtime:
        result = await runtime.run(SubagentStartRequest("worker", "w"))
        store.begin_receipt("crashed", kind="message")  # a process died after writing it
        with pytest.raises(RequestPending) as caught:
            runtime.message(result.run_id, "hello", request_id="crashed")
        assert caught.value.data["request_id"] == "crashed"
        assert store.pending_outbox() == []
        with pytest.raises(UnknownRun):
            runtime.message("no-such-run", "hello")
        with pytest.raises(InvalidRequest):
            runtime.message(result.run_id, "  ")
        with pytest.raises(InvalidRequest):
            runtime.message(result.run_id, "x", kind="shout")
    store.close()


async def test_a_durable_stop_is_a_cancel_delivery_applied_once(
    agents: Project, tmp_path: Path
) -> None:
    entered, released = anyio.Event(), anyio.Event()
    agents.registry = ToolRegistry()
    agents.registry.register(hold_tool(entered, released))

    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(tool_calls=(ToolCall("c", "Read", {}),), stop_reason="tool_calls")

    store = SQLiteStore(tmp_path / "state.db")
    async with agents.runtime(InProcessProvider(FunctionModel(answer)), store=store) as runtime:
        with anyio.fail_after(20):
            info = await runtime.start(SubagentStartRequest("worker", "w", background=True))
            await entered.wait()
            stopped = await runtime.stop(info.run_id, request_id="stop-1")
            again = await runtime.stop(info.run_id, request_id="stop-1")
    assert stopped.status == again.status == "stopped"
    receipt = stored_receipt(store, "stop-1")
    assert receipt is not None and receipt.kind == "stop" and receipt.status == "completed"
    assert store.pending_outbox() == []
    store.close()


async def test_a_durable_steer_is_a_brief(agents: Project, tmp_path: Path) -> None:
    entered, released = anyio.Event(), anyio.Event()
    agents.registry = ToolRegistry()
    agents.registry.register(hold_tool(entered, released))
    seen: list[list[str]] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        seen.append([m.content for m in request.messages if m.role == "user"])
        if replies(request) == 0:
            return ModelResponse(tool_calls=(ToolCall("c1", "Read", {}),), stop_reason="tool_calls")
        return ModelResponse(text="done")

    async with agents.runtime(InProcessProvider(FunctionModel(answer))) as runtime:
        with anyio.fail_after(20):
            info = await runtime.start(SubagentStartRequest("worker", "work", background=True))
            await entered.wait()
            delivery = runtime.steer(info.run_id, "change course", request_id="s-1")
            released.set()
            await runtime.wait(info.run_id)
    assert delivery is not None and delivery.kind == "brief"
    (brief,) = messages_in(seen[-1])
    assert 'kind="brief"' in brief and "change course" in brief
