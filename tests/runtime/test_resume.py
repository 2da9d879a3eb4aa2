"""Resume: a stored run continues in a new runtime with its durable depth, its stored
conversation and the scope of a fresh start, across a real process restart."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import textwrap
from pathlib import Path

import anyio
import pytest

from membrane.config.values import Settings
from membrane.errors import (
    InvalidDepth,
    InvalidRequest,
    StoreError,
    UnknownRun,
    UnsupportedCapability,
)
from membrane.extensions.hooks import ExtensionHooks
from membrane.models.base import Message, ModelRequest, ModelResponse, ToolCall
from membrane.resolve import CallParams
from membrane.runtime import (
    InProcessProvider,
    RuntimeOptions,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.runtime.provider import ChildSpec, SetupCallback
from membrane.store import SessionHeader, SQLiteStore
from membrane.testing import FunctionModel, ScriptedModel
from membrane.workspace import Workspace
from process_support import first_line_then_kill

from .conftest import Project, after_leases_expire

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).parent / "scripts" / "resume_chain.py"


def turns(*replies: ModelResponse) -> FunctionModel:
    """A model that gives ``replies`` in order, one per request."""
    queue = list(replies)

    async def answer(request: ModelRequest) -> ModelResponse:
        return queue.pop(0)

    return FunctionModel(answer)


def call(name: str, call_id: str, **arguments: object) -> ModelResponse:
    return ModelResponse(tool_calls=(ToolCall(call_id, name, arguments),), stop_reason="tool_calls")


def result_of(messages: tuple[Message, ...], call_id: str) -> Message:
    return next(m for m in messages if m.role == "tool" and m.tool_call_id == call_id)


def error_code(message: Message) -> str | None:
    return str(json.loads(message.content)["error"]["code"]) if message.is_error else None


def offered(request: ModelRequest) -> set[str]:
    return {entry["name"] for entry in request.tools}


async def _killed_chain(
    project: Project, tmp_path: Path, **worker: object
) -> tuple[SQLiteStore, str]:
    """lead -> worker (``worker`` adds to its frontmatter), run in another process that is
    killed with the worker mid-run; the store reopened once the leases expired, and the
    worker's id."""
    project.agent("lead", allowed_subagents=["worker"])
    project.agent("worker", tools="Read", **worker)
    project.settings = Settings(max_depth=1)
    db = tmp_path / "state.db"
    root, home = project.root, project.home
    with anyio.fail_after(60):
        found = await anyio.to_thread.run_sync(
            lambda: first_line_then_kill(SCRIPT, db, root, home, what="the chain process")
        )
    return SQLiteStore(db, clock=after_leases_expire()), str(found["worker"])


async def test_a_killed_childs_resume_keeps_its_depth_and_conversation_and_its_cap(
    project: Project, tmp_path: Path
) -> None:
    store, worker = await _killed_chain(project, tmp_path, allowed_subagents=["worker"])
    crashed = store.get_header(worker)
    assert crashed is not None and crashed.status == "running"
    assert crashed.delegation_depth == 1
    lead = crashed.parent_id
    assert lead is not None
    assert store.transcript_length(worker) == 3  # the task, the Read call, its result

    model = turns(call("Task", "deeper-1", agent="worker", task="go deeper"), ModelResponse("done"))
    async with project.runtime(InProcessProvider(model), store=store) as runtime:
        info = await runtime.resume(worker, "now summarise")
        assert (info.run_id, info.depth, info.parent_id, info.status) == (
            worker,
            1,
            lead,
            "running",
        )
        with anyio.fail_after(30):
            result = await runtime.wait(worker)

    assert result.status == "completed" and result.text == "done"
    first = model.requests[0].messages
    assert [m.role for m in first] == ["user", "assistant", "tool", "user"]
    assert "look around" in first[0].content
    assert first[1].tool_calls[0].name == "Read"
    assert "contents of notes.txt" in first[2].content
    assert first[3].content == "now summarise"
    assert "Task" in offered(model.requests[0])
    rejected = result_of(model.requests[1].messages, "deeper-1")
    assert error_code(rejected) == "depth-limit-exceeded"
    assert store.list_sessions(parent_id=worker) == []
    header = store.get_header(worker)
    assert header is not None
    assert (header.delegation_depth, header.status) == (1, "completed")
    stored = store.transcript(worker)
    assert [m["role"] for m in stored] == [m.role for m in model.requests[1].messages] + [
        "assistant"
    ]
    kinds = [event.kind for event in store.events(session_id=worker)]
    assert kinds.count("published") == 2 and kinds[-1] == "completed"
    resumed = [e for e in store.events(session_id=worker) if e.kind == "published"][-1]
    assert resumed.data["resumed"] is True and resumed.data["depth"] == 1
    store.close()


EXTENSION = """
from membrane.tools.spec import Tool

LATE = []


def tool(name):
    async def handler(arguments, context):
        return name + " ran"

    return Tool(
        name=name,
        description="the " + name + " tool",
        input_schema={"type": "object", "properties": {}},
        handler=handler,
    )


def setup(ext):
    ext.register_tool(tool("foo_search"))

    def late(event):
        if not LATE:
            LATE.append(ext.register_tool(tool("foo_late")))

    ext.on("session_shutdown", late)
"""


def _runtime(ws: Workspace, model: FunctionModel, store: SQLiteStore) -> SubagentRuntime:
    hooks = ExtensionHooks.from_extensions(ws.extensions.values())
    return SubagentRuntime(
        catalog=ws.catalog,
        registry=ws.registry,
        provider=InProcessProvider(model, hooks=hooks),
        store=store,
        options=RuntimeOptions(
            settings=ws.settings, project=ws.project, deployment=ws.deployment()
        ),
    )


async def test_an_unselected_late_extension_tool_stays_hidden_and_vetoed_after_a_resume(
    project: Project, tmp_path: Path
) -> None:
    folder = project.root / ".membrane" / "extensions"
    folder.mkdir(parents=True)
    (folder / "foo.py").write_text(textwrap.dedent(EXTENSION), encoding="utf-8")
    project.agent("searcher", tools="ext:foo/foo_search")
    ws = Workspace.open(project.root, home=project.home)
    store = SQLiteStore(tmp_path / "state.db")

    first = turns(call("foo_search", "s-1"), ModelResponse("paused"))
    async with _runtime(ws, first, store) as runtime:
        run = await runtime.run(SubagentStartRequest("searcher", "search"))
    assert run.status == "completed"
    assert "foo_late" in ws.registry  # registered by the extension after the first run
    stored = store.transcript(run.run_id)

    model = turns(call("foo_late", "l-1"), ModelResponse("done"))
    async with _runtime(ws, model, store) as runtime:
        await runtime.resume(run.run_id, "try the late one")
        assert "foo_late" not in runtime.view(run.run_id).names
        with anyio.fail_after(30):
            result = await runtime.wait(run.run_id)

    assert result.status == "completed"
    assert offered(model.requests[0]) == {"foo_search"}
    assert offered(model.requests[1]) == {"foo_search"}
    assert len(model.requests[0].messages) == len(stored) + 1
    assert model.requests[0].messages[1].tool_calls[0].name == "foo_search"
    vetoed = result_of(model.requests[1].messages, "l-1")
    assert error_code(vetoed) == "tool-not-visible"
    assert "foo_search" not in vetoed.content
    vetoes = [e.data for e in store.events(session_id=run.run_id) if e.kind == "vetoed_call"]
    assert [v["name"] for v in vetoes] == ["foo_late"]
    store.close()


async def _ended_run(project: Project, store: SQLiteStore) -> str:
    async with project.runtime(ScriptedModel({"default": [{"text": "ok"}]}), store=store) as rt:
        result = await rt.run(SubagentStartRequest("waiter", "wait"))
    assert result.status == "completed"
    return result.run_id


async def test_resuming_an_unknown_run_is_unknown_run(project: Project, tmp_path: Path) -> None:
    project.agent("waiter")
    store = SQLiteStore(tmp_path / "state.db")
    run_id = await _ended_run(project, store)
    async with project.runtime(InProcessProvider(turns()), store=store) as runtime:
        with pytest.raises(UnknownRun):
            await runtime.resume("nope", "continue")
        with pytest.raises(UnknownRun, match="among your subagents"):
            await runtime.resume(run_id, "continue", caller="someone-else")
        assert runtime.runs() == []
    store.close()


async def test_resuming_a_run_whose_stored_depth_is_corrupt_is_invalid_depth(
    project: Project, tmp_path: Path
) -> None:
    project.agent("waiter")
    db = tmp_path / "state.db"
    store = SQLiteStore(db)
    run_id = await _ended_run(project, store)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sessions SET delegation_depth = '0' WHERE session_id = ?", (run_id,))
    async with project.runtime(InProcessProvider(turns()), store=store) as runtime:
        with pytest.raises(InvalidDepth):
            await runtime.resume(run_id, "continue")
        assert runtime.runs() == []
    store.close()


async def test_resuming_a_live_run_is_an_invalid_request(project: Project) -> None:
    project.agent("waiter")
    release = anyio.Event()

    async def wait_then_answer(request: ModelRequest) -> ModelResponse:
        await release.wait()
        return ModelResponse("ok")

    async with project.runtime(InProcessProvider(FunctionModel(wait_then_answer))) as runtime:
        info = await runtime.start(SubagentStartRequest("waiter", "wait"))
        with pytest.raises(InvalidRequest, match="steer it instead"):
            await runtime.resume(info.run_id, "continue")
        release.set()
        assert (await runtime.wait(info.run_id)).status == "completed"


async def test_a_run_that_ended_here_continues_its_conversation_when_resumed(
    project: Project,
) -> None:
    project.agent("waiter")
    model = turns(ModelResponse("first"), ModelResponse("second"))
    async with project.runtime(InProcessProvider(model)) as runtime:
        first = await runtime.run(SubagentStartRequest("waiter", "wait"))
        await runtime.resume(first.run_id, "and again")
        second = await runtime.wait(first.run_id)
        assert runtime.get(first.run_id).status == "completed"
        with pytest.raises(InvalidRequest, match="non-empty"):
            await runtime.resume(first.run_id, "  ")
    assert second.text == "second"
    assert [m.content for m in model.requests[1].messages][1:] == ["first", "and again"]
    assert len(runtime.store.transcript(first.run_id)) == 4


async def test_a_header_without_start_controls_cannot_be_resumed(project: Project) -> None:
    project.agent("waiter")
    async with project.runtime(InProcessProvider(turns())) as runtime:
        runtime.store.create_session(
            SessionHeader("early", "waiter", None, 0, "running", meta={"agent_type": "waiter"})
        )
        with pytest.raises(InvalidRequest, match="nothing to resume"):
            await runtime.resume("early", "continue")
        assert runtime.runs() == []


async def test_a_header_with_controls_but_no_task_or_conversation_cannot_be_resumed(
    project: Project,
) -> None:
    project.agent("waiter")
    meta = {"agent_type": "waiter", "controls": {"tool_filter": None}}
    async with project.runtime(InProcessProvider(turns())) as runtime:
        runtime.store.create_session(
            SessionHeader("early", "waiter", None, 0, "running", meta=meta)
        )
        with pytest.raises(InvalidRequest, match="no conversation and no task"):
            await runtime.resume("early", "continue")
        assert runtime.runs() == []


async def test_a_parent_killed_during_its_first_turn_resumes_from_its_task(
    project: Project, tmp_path: Path
) -> None:
    store, worker = await _killed_chain(project, tmp_path)
    lead = store.get_header(worker).parent_id  # type: ignore[union-attr]
    assert lead is not None
    crashed = store.get_header(lead)
    assert crashed is not None and crashed.status == "running"
    assert store.transcript_length(lead) == 0  # killed inside turn 1: nothing journaled
    assert crashed.meta["task"] == "delegate the survey"
    assert crashed.meta["controls"] == {"tool_filter": None, "persona": None, "max_turns": None}

    model = turns(ModelResponse("summary"))
    async with project.runtime(InProcessProvider(model), store=store) as runtime:
        info = await runtime.resume(lead, "report what you have")
        assert (info.run_id, info.depth, info.status) == (lead, 0, "running")
        with anyio.fail_after(30):
            result = await runtime.wait(lead)

    assert result.status == "completed" and result.text == "summary"
    sent = model.requests[0].messages
    # The killed process is dead, so the new runtime's first sweep reconciled its worker
    # at once (its lease had not run out): the lead hears that the worker was interrupted.
    notice = sent[-1].content
    assert [(m.role, m.content) for m in sent[:-1]] == [
        ("user", "delegate the survey"),
        ("user", "report what you have"),
    ]
    assert notice.startswith(f'<task_status run_id="{worker}"') and 'status="interrupted"' in notice
    assert "Task" in offered(model.requests[0])
    assert [m["content"] for m in store.transcript(lead)] == [
        "delegate the survey",
        "report what you have",
        notice,
        "summary",
    ]
    resumed = [e for e in store.events(session_id=lead) if e.kind == "published"][-1]
    assert resumed.data["resumed"] is True and resumed.data["messages"] == 1
    store.close()


async def test_a_resumed_run_gets_back_the_persona_and_max_turns_it_was_started_with(
    project: Project,
) -> None:
    project.agent("waiter", tools="Read")
    project.settings = Settings(grace_turns=0)
    model = turns(
        ModelResponse("first"),
        call("Read", "r-1", path="a"),
        call("Read", "r-2", path="b"),
        ModelResponse("never reached"),
    )
    request = SubagentStartRequest(
        "waiter",
        "wait",
        persona="You are PERSONA-7, the {{agent}}.",
        call=CallParams(max_turns=1),
    )
    async with project.runtime(InProcessProvider(model)) as runtime:
        first = await runtime.run(request)
    header = runtime.store.get_header(first.run_id)
    assert header is not None
    assert header.meta["controls"]["persona"] == "You are PERSONA-7, the {{agent}}."
    assert header.meta["controls"]["max_turns"] == 1
    async with project.runtime(InProcessProvider(model), store=runtime.store) as again:
        await again.resume(first.run_id, "more")
        with anyio.fail_after(30):
            second = await again.wait(first.run_id)

    assert first.text == "first"
    assert "You are PERSONA-7, the waiter." in model.requests[0].system
    assert "You are PERSONA-7, the waiter." in model.requests[1].system
    assert model.requests[1].system == model.requests[0].system
    assert (second.status, second.turns, len(model.requests)) == ("aborted", 1, 2)


async def test_a_provider_that_cannot_continue_a_conversation_refuses_a_resume(
    project: Project,
) -> None:
    project.agent("waiter")

    class Elsewhere:
        name = "elsewhere"
        capabilities = dataclasses.replace(InProcessProvider.capabilities, resume=False)

        async def create(self, request: object, setup: object) -> object:
            raise AssertionError("a resume on this provider builds nothing")

    async with project.runtime(Elsewhere()) as runtime:  # type: ignore[arg-type]
        with pytest.raises(UnsupportedCapability, match="cannot resume"):
            await runtime.resume("any", "continue")


async def test_any_provider_that_advertises_resume_continues_the_stored_conversation(
    project: Project,
) -> None:
    project.agent("waiter")
    model = turns(ModelResponse("first"), ModelResponse("second"))
    specs: list[ChildSpec] = []

    class Relay:
        """Not an ``InProcessProvider``: it advertises ``resume`` and delegates to one."""

        name = "relay"
        capabilities = InProcessProvider.capabilities

        def __init__(self) -> None:
            self._inner = InProcessProvider(model)

        async def create(self, request: ChildSpec, setup: SetupCallback) -> object:
            specs.append(request)
            return await self._inner.create(request, setup)

    async with project.runtime(Relay()) as runtime:  # type: ignore[arg-type]
        first = await runtime.run(SubagentStartRequest("waiter", "go"))
    async with project.runtime(Relay(), store=runtime.store) as again:  # type: ignore[arg-type]
        await again.resume(first.run_id, "more")
        with anyio.fail_after(30):
            second = await again.wait(first.run_id)
    assert [spec.resumed for spec in specs] == [False, True]
    assert [(m.role, m.content) for m in specs[1].transcript] == [
        ("user", "go"),
        ("assistant", "first"),
    ]
    assert second.text == "second"
    assert [(m.role, m.content) for m in model.requests[1].messages] == [
        ("user", "go"),
        ("assistant", "first"),
        ("user", "more"),
    ]


async def test_a_resumed_child_keeps_the_tool_filter_it_was_started_with(
    project: Project,
) -> None:
    project.agent("reader", tools="Read, Grep, Glob")
    model = turns(ModelResponse("first"), ModelResponse("second"))
    request = SubagentStartRequest("reader", "read", tool_filter={"deny": ["Grep"]})
    async with project.runtime(InProcessProvider(model)) as runtime:
        first = await runtime.run(request)
    async with project.runtime(InProcessProvider(model), store=runtime.store) as again:
        await again.resume(first.run_id, "more")
        assert (await again.wait(first.run_id)).text == "second"
    assert offered(model.requests[0]) == offered(model.requests[1]) == {"Read", "Glob"}


async def test_a_call_left_unanswered_by_a_crash_is_answered_as_interrupted_on_resume(
    project: Project,
) -> None:
    project.agent("waiter")
    model = turns(ModelResponse("done"))
    async with project.runtime(InProcessProvider(model)) as runtime:
        store = runtime.store
        meta = {"agent_type": "waiter", "controls": {"tool_filter": None}}
        store.create_session(SessionHeader("crashed", "waiter", None, 0, "running", meta=meta))
        pending = {"id": "c-1", "name": "Read", "arguments": {"path": "a"}}
        store.append_messages(
            "crashed",
            [
                {"role": "user", "content": "wait"},
                {"role": "assistant", "content": "", "tool_calls": [pending]},
            ],
            start=0,
        )
        await runtime.resume("crashed", "go on")
        assert (await runtime.wait("crashed")).status == "completed"
    sent = model.requests[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
    assert error_code(result_of(sent, "c-1")) == "tool-skipped"
    assert [m["role"] for m in store.transcript("crashed")] == [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]


async def test_a_malformed_stored_message_fails_the_resume_with_a_store_error(
    project: Project,
) -> None:
    project.agent("waiter")
    async with project.runtime(InProcessProvider(turns())) as runtime:
        meta = {"agent_type": "waiter", "controls": {"tool_filter": None}}
        runtime.store.create_session(SessionHeader("bad", "waiter", None, 0, "ended", meta=meta))
        runtime.store.append_messages("bad", [{"role": "system", "content": "x"}], start=0)
        with pytest.raises(StoreError, match="message 0 of run 'bad' is malformed"):
            await runtime.resume("bad", "go on")
        assert runtime.runs() == []


async def test_two_concurrent_resumes_of_one_run_publish_it_once(project: Project) -> None:
    project.agent("waiter")
    release = anyio.Event()

    async def answer(request: ModelRequest) -> ModelResponse:
        if len(request.messages) > 1:
            await release.wait()
        return ModelResponse("ok")

    # Both resumes get past the early "is it live?" check before either republishes, so only
    # the re-check at publication can keep the run from getting two loops.
    both_building = anyio.Event()
    building: list[str] = []

    class Gated(InProcessProvider):
        async def create(self, request: ChildSpec, setup: SetupCallback):  # type: ignore[no-untyped-def]
            if request.resumed:
                building.append(request.run_id)
                if len(building) == 2:
                    both_building.set()
                with anyio.fail_after(10):
                    await both_building.wait()
            return await super().create(request, setup)

    outcomes: list[str] = []
    async with project.runtime(Gated(FunctionModel(answer))) as runtime:
        first = await runtime.run(SubagentStartRequest("waiter", "wait"))

        async def resume() -> None:
            try:
                await runtime.resume(first.run_id, "again")
                outcomes.append("resumed")
            except InvalidRequest:
                outcomes.append("refused")

        async with anyio.create_task_group() as group:
            group.start_soon(resume)
            group.start_soon(resume)
        release.set()
        assert (await runtime.wait(first.run_id)).status == "completed"
    assert sorted(outcomes) == ["refused", "resumed"]
    assert len(building) == 2
    published = [e for e in runtime.store.events(session_id=first.run_id) if e.kind == "published"]
    assert len(published) == 2


async def test_a_resumed_parent_repeating_a_task_call_learns_its_child_was_interrupted(
    project: Project, tmp_path: Path
) -> None:
    store, worker = await _killed_chain(project, tmp_path)
    lead = store.get_header(worker).parent_id  # type: ignore[union-attr]
    assert lead is not None

    # The same arguments as the first process's call, so the same request id.
    model = turns(
        call("Task", "again-1", agent="worker", task="look around"), ModelResponse("noted")
    )
    async with project.runtime(InProcessProvider(model), store=store) as runtime:
        await runtime.resume(lead, "go on")
        with anyio.fail_after(30):
            result = await runtime.wait(lead)

    assert result.status == "completed"
    answer = result_of(model.requests[1].messages, "again-1")
    error = json.loads(answer.content)["error"]
    assert error["code"] == "child-failed"
    assert f"({worker}), started earlier" in error["message"]
    assert "was interrupted" in error["message"]
    # The sweep at the runtime's start reconciled it at once: its driver is dead.
    assert "stored status is still 'interrupted'" in error["message"]
    assert "resume the run" in error["message"]
    assert [h.session_id for h in store.list_sessions(parent_id=lead)] == [worker]
    store.close()
