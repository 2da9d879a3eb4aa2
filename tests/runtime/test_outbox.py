"""Durable completion notices: a background child's end owes its parent an outbox item, written
with the end itself, acknowledged only once the notice is in the parent's conversation, kept
pending with bounded backoff otherwise, and delivered to the parent's resumed run."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane.durable.outbox import MAX_DELAY, backoff, task_notification
from membrane.errors import StoreError
from membrane.models.base import Message, ModelRequest, ModelResponse, ToolCall
from membrane.runtime import (
    InProcessProvider,
    LifecycleEvent,
    RunResult,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.store import OutboxItem, SQLiteStore
from membrane.testing import FunctionModel
from membrane.tools.registry import ToolRegistry
from membrane.tools.spec import Tool, ToolContext
from process_support import first_line_then_kill

from .conftest import Project, after_leases_expire

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).parent / "scripts" / "notice_crash.py"
REPORT = "the survey found 3 files"


def notices(messages: tuple[Message, ...] | list[dict[str, Any]]) -> list[str]:
    """The task notifications among ``messages`` (live ``Message``s or stored records)."""
    texts = [m.content if isinstance(m, Message) else m["content"] for m in messages]
    return [text for text in texts if text.startswith("<task_notification ")]


def background_task(call_id: str) -> ModelResponse:
    start = ToolCall(call_id, "Task", {"agent": "worker", "task": "survey", "background": True})
    return ModelResponse(tool_calls=(start,), stop_reason="tool_calls")


def replies(request: ModelRequest) -> int:
    return sum(1 for message in request.messages if message.role == "assistant")


def only_item(store: SQLiteStore, recipient: str) -> OutboxItem:
    items = [i for i in store.pending_outbox() if i.recipient == recipient]
    assert len(items) == 1, items
    return items[0]


def delivered(store: SQLiteStore, item_id: int) -> bool:
    return all(item.id != item_id for item in store.pending_outbox())


def hold_tool(released: anyio.Event) -> Tool:
    async def hold(arguments: Mapping[str, Any], context: ToolContext) -> str:
        await released.wait()
        return "held"

    return Tool(name="Read", description="Read.", input_schema={"type": "object"}, handler=hold)


async def start_beside_a_held_read(request: ModelRequest) -> ModelResponse:
    """The worker reports; the lead starts it in the background beside a held ``Read``, then
    answers."""
    if request.agent == "worker":
        return ModelResponse(text=REPORT)
    if replies(request) == 0:
        start = background_task("t1")
        return ModelResponse(
            tool_calls=(*start.tool_calls, ToolCall("h1", "Read", {})), stop_reason="tool_calls"
        )
    return ModelResponse(text="lead done")


async def run_lead_until_the_worker_ends(
    runtime: SubagentRuntime,
    *,
    then: anyio.Event,
    check: Callable[[LifecycleEvent], None] | None = None,
    end: str = "completed",
) -> RunResult:
    """Run ``lead``; when its worker's end (an ``end`` event) is announced, ``check`` that
    event and set ``then`` (which lets the lead go on)."""
    stream = runtime.events()

    async def watch() -> None:
        async for event in stream:
            if event.agent == "worker" and event.kind == end:
                if check is not None:
                    check(event)
                then.set()
                return

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            result = await runtime.run(SubagentStartRequest("lead", "delegate"))
    stream.close()
    return result


@pytest.fixture
def agents(project: Project) -> Project:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker")
    return project


async def _run_lead_until_its_notice_is_dropped(project: Project, db: Path) -> tuple[str, int]:
    """The lead starts a background worker, and gives its final answer while the worker's
    notice is queued: it is dropped, unacknowledged. Returns the lead's id and the item's."""
    ended = anyio.Event()

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "worker":
            return ModelResponse(text=REPORT)
        if replies(request) == 0:
            return background_task("t1")
        await ended.wait()  # the notice is queued in the lead while it answers
        return ModelResponse(text="lead done")

    project.registry = ToolRegistry()
    project.registry.register(hold_tool(anyio.Event()))
    store = SQLiteStore(db)
    async with project.runtime(InProcessProvider(FunctionModel(answer)), store=store) as runtime:
        result = await run_lead_until_the_worker_ends(runtime, then=ended)
        assert (result.status, result.text) == ("completed", "lead done")
        item = only_item(store, result.run_id)
        assert item.delivered_at is None
        assert notices(store.transcript(result.run_id)) == []
    store.close()
    return result.run_id, item.id


async def test_a_background_childs_completion_reaches_a_live_parent_through_the_outbox(
    agents: Project, tmp_path: Path
) -> None:
    released = anyio.Event()
    agents.registry = ToolRegistry()
    agents.registry.register(hold_tool(released))

    model = FunctionModel(start_beside_a_held_read)
    store = SQLiteStore(tmp_path / "state.db")
    async with agents.runtime(InProcessProvider(model), store=store) as runtime:

        def check(event: LifecycleEvent) -> None:
            # The end and its item are committed; the notice waits for the boundary.
            item = only_item(store, event.parent_id or "")
            assert item.payload == {
                "kind": "completion",
                "run_id": event.run_id,
                "agent": "worker",
                "status": "completed",
                "text": REPORT,
                "error": None,
            }

        result = await run_lead_until_the_worker_ends(runtime, check=check, then=released)
        lead = next(i for i in runtime.runs() if i.agent == "lead")
        worker = next(i for i in runtime.runs() if i.agent == "worker")
    assert (result.status, result.text) == ("completed", "lead done")
    sent = [r for r in model.requests if r.agent == "lead"][1].messages
    [notice] = notices(sent)
    assert sent[-1].content == notice
    assert f'run_id="{worker.run_id}"' in notice and REPORT in notice
    item_id = int(re.search(r'delivery="(\d+)"', notice).group(1))  # type: ignore[union-attr]
    assert delivered(store, item_id)
    assert store.pending_outbox() == []
    assert notices(store.transcript(lead.run_id)) == [notice]
    store.close()


async def test_the_outbox_item_is_written_in_the_same_transaction_as_the_childs_end(
    agents: Project, tmp_path: Path
) -> None:
    class EndFails(SQLiteStore):
        """Refuses the worker's end event: the last write of its end's transaction."""

        def append_event(self, session_id: str, kind: str, data: Mapping[str, Any]) -> int:
            if kind == "completed" and data.get("agent") == "worker":
                raise StoreError("disk full")
            return super().append_event(session_id, kind, data)

    released = anyio.Event()
    agents.registry = ToolRegistry()
    agents.registry.register(hold_tool(released))

    model = FunctionModel(start_beside_a_held_read)
    store = EndFails(tmp_path / "state.db")
    async with agents.runtime(InProcessProvider(model), store=store) as runtime:

        def check(event: LifecycleEvent) -> None:
            assert event.seq == 0  # delivered, but not durable

        result = await run_lead_until_the_worker_ends(
            runtime, check=check, then=released, end="error"
        )
        worker = next(i for i in runtime.runs() if i.agent == "worker")
    assert result.status == "completed"
    # The worker's end was not stored: it is told as `store-error`, never as `completed`.
    assert worker.status == "error"
    assert worker.result is not None and worker.result.error is not None
    assert worker.result.error["code"] == "store-error"
    header = store.get_header(worker.run_id)
    assert header is not None and (header.status, header.result) == ("running", None)
    assert store.pending_outbox() == [] and store.next_outbox_attempt() is None
    # The live lead still heard of it, in this process only: no delivery id to acknowledge.
    [notice] = notices([r for r in model.requests if r.agent == "lead"][1].messages)
    assert "delivery=" not in notice and REPORT in notice
    store.close()


async def test_a_notice_dropped_with_the_final_answer_stays_pending_until_the_parent_resumes(
    agents: Project, tmp_path: Path
) -> None:
    db = tmp_path / "state.db"
    lead_id, item_id = await _run_lead_until_its_notice_is_dropped(agents, db)

    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="noted")

    model = FunctionModel(answer)
    store = SQLiteStore(db)
    async with agents.runtime(InProcessProvider(model), store=store) as runtime:
        with anyio.fail_after(20):
            await runtime.resume(lead_id, "anything new?")
            result = await runtime.wait(lead_id)
    assert result.text == "noted"
    sent = model.requests[0].messages
    [notice] = notices(sent)
    assert [m.content for m in sent[-2:]] == ["anything new?", notice]
    assert f'delivery="{item_id}"' in notice and REPORT in notice
    assert delivered(store, item_id)
    assert notices(store.transcript(lead_id)) == [notice]
    store.close()


async def test_a_parent_that_ended_first_keeps_the_notice_with_bounded_backoff_then_dead_letters_it(
    agents: Project, tmp_path: Path
) -> None:
    agents.registry = ToolRegistry()
    agents.registry.register(hold_tool(anyio.Event()))
    agents.settings = dataclasses.replace(agents.settings, outbox_max_attempts=12)

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "worker":
            await anyio.sleep_forever()
        if replies(request) == 0:
            return background_task("t1")
        return ModelResponse(text="lead done")

    store = SQLiteStore(tmp_path / "state.db")
    async with agents.runtime(InProcessProvider(FunctionModel(answer)), store=store) as runtime:
        with anyio.fail_after(20):
            lead = await runtime.start(SubagentStartRequest("lead", "delegate"))
            await runtime.wait(lead.run_id)
            [worker] = runtime.runs(parent_id=lead.run_id)
            # The lead's end stopped its worker, whose end is owed to the ended lead.
            assert (await runtime.wait(worker.run_id)).status == "stopped"
        item = only_item(store, lead.run_id)
        assert item.payload["status"] == "stopped"
        assert runtime.outbox.pending(lead.run_id) == [item]
        now, first = item.next_attempt_at, item.attempts
        delays = []
        while item.attempts < 11:
            next_pass = runtime.outbox.step(now=now)
            after = only_item(store, lead.run_id)
            assert after.attempts == item.attempts + 1 and after.delivered_at is None
            assert "has ended" in (store.outbox_error(after.id) or "")
            delays.append(after.next_attempt_at - now)
            assert next_pass == after.next_attempt_at > now  # nothing is due before then
            item, now = after, after.next_attempt_at
        # The twelfth failed attempt dead-letters it: kept, with its last error, never due.
        assert runtime.outbox.step(now=now) is None
        assert store.pending_outbox() == []
        (dead,) = store.dead_outbox()
        # It keeps every attempt its error speaks of, the last one included.
        assert (dead.id, dead.attempts) == (item.id, 12)
        assert "has ended" in dead.last_error and "gave up after 12 attempts" in dead.last_error
    assert delays == [backoff(attempts) for attempts in range(first, 11)]
    assert delays == sorted(delays) and delays[-1] == MAX_DELAY and max(delays) == MAX_DELAY
    assert delays[0] < MAX_DELAY
    store.close()


async def test_a_notice_the_stored_transcript_already_holds_is_acknowledged_not_repeated(
    agents: Project, tmp_path: Path
) -> None:
    db = tmp_path / "state.db"
    lead_id, item_id = await _run_lead_until_its_notice_is_dropped(agents, db)
    store = SQLiteStore(db)
    # As if a crash came after the journal stored the injected notice, before its acknowledgement.
    item = only_item(store, lead_id)
    payload = item.payload
    stored = task_notification(
        run_id=payload["run_id"],
        agent=payload["agent"],
        status=payload["status"],
        text=payload["text"],
        delivery=item_id,
    )
    record = {"role": "user", "content": stored, "tool_calls": [], "kind": "text"}
    store.append_messages(lead_id, [record], start=store.transcript_length(lead_id))

    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="noted")

    model = FunctionModel(answer)
    async with agents.runtime(InProcessProvider(model), store=store) as runtime:
        with anyio.fail_after(20):
            await runtime.resume(lead_id, "anything new?")
            await runtime.wait(lead_id)
    assert notices(model.requests[0].messages) == [stored]
    assert model.requests[0].messages[-1].content == "anything new?"
    assert delivered(store, item_id)
    store.close()


def _kill_lead_with_its_notice_pending(project: Project, db: Path) -> dict[str, str]:
    found: dict[str, str] = first_line_then_kill(
        SCRIPT, db, project.root, project.home, what="the lead process"
    )
    return found


async def test_a_notice_pending_when_the_parents_process_is_killed_reaches_its_resumed_run_once(
    agents: Project, tmp_path: Path
) -> None:
    db = tmp_path / "state.db"
    with anyio.fail_after(60):
        ids = await anyio.to_thread.run_sync(lambda: _kill_lead_with_its_notice_pending(agents, db))
    store = SQLiteStore(db, clock=after_leases_expire())
    item = only_item(store, ids["lead"])
    assert (item.payload["run_id"], item.payload["text"]) == (ids["worker"], REPORT)
    assert notices(store.transcript(ids["lead"])) == []

    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="the worker found 3 files")

    model = FunctionModel(answer)
    agents.registry = ToolRegistry()
    agents.registry.register(hold_tool(anyio.Event()))
    async with agents.runtime(InProcessProvider(model), store=store) as runtime:
        with anyio.fail_after(20):
            await runtime.resume(ids["lead"], "carry on")
            result = await runtime.wait(ids["lead"])
    assert result.text == "the worker found 3 files"
    sent = model.requests[0].messages
    [notice] = notices(sent)
    assert f'delivery="{item.id}"' in notice and f'run_id="{ids["worker"]}"' in notice
    assert [m.content for m in sent[-2:]] == ["carry on", notice]
    # The turn that started the worker was stored; the turn in flight (its Read) was not.
    assert [m.tool_call_id for m in sent if m.role == "tool"] == ["lead-1"]
    assert delivered(store, item.id)
    assert notices(store.transcript(ids["lead"])) == [notice]
    store.close()


async def test_a_foreground_childs_result_is_returned_inline_and_owes_no_notice(
    agents: Project, tmp_path: Path
) -> None:
    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "worker":
            return ModelResponse(text=REPORT)
        if replies(request) == 0:
            call = ToolCall("t1", "Task", {"agent": "worker", "task": "survey"})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        return ModelResponse(text="lead done")

    model = FunctionModel(answer)
    store = SQLiteStore(tmp_path / "state.db")
    async with agents.runtime(InProcessProvider(model), store=store) as runtime:
        with anyio.fail_after(20):
            result = await runtime.run(SubagentStartRequest("lead", "delegate"))
    assert result.text == "lead done"
    sent = [r for r in model.requests if r.agent == "lead"][1].messages
    assert REPORT in sent[-1].content and sent[-1].role == "tool"
    assert notices(sent) == []
    assert store.pending_outbox() == [] and store.next_outbox_attempt() is None
    store.close()
