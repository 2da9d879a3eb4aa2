"""``AskParent``: a child whose definition allows it asks its parent, waits, and gets the answer
that the parent's ``TaskMessage`` sends; durable across a restart of the host on a real SQLite
file, with a clear error where no parent can answer."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from membrane.errors import NoOpenQuestion
from membrane.models.base import Message, ModelRequest, ModelResponse, ToolCall
from membrane.runtime import InProcessProvider, SubagentStartRequest
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel

from .conftest import Project, after_leases_expire

QUESTION = "which colour should the shed be?"


def _call(name: str, **arguments: Any) -> ModelResponse:
    return ModelResponse(
        tool_calls=(ToolCall(id=f"call-{name}-{len(json.dumps(arguments))}", name=name,
                             arguments=arguments),),
        stop_reason="tool_calls",
    )  # fmt: skip


def _tool_results(request: ModelRequest) -> list[Message]:
    return [m for m in request.messages if m.role == "tool"]


def _last_result(request: ModelRequest) -> dict[str, Any]:
    found = json.loads(_tool_results(request)[-1].content)
    assert isinstance(found, dict)
    return found


def _helper(request: ModelRequest) -> ModelResponse:
    """Asks its parent once, then paints with what the call returned, or (resumed after a
    stop) with the ``<parent_answer>`` notice its conversation ends with."""
    results = _tool_results(request)
    if not results:
        return _call("AskParent", question=QUESTION)
    notices = [m.content for m in request.messages if m.content.startswith("<parent_answer ")]
    if notices:
        return ModelResponse(text=f"painted it from a notice: {notices[-1]}")
    return ModelResponse(text=f"painted it: {results[-1].content}")


def _lead(answer: str) -> Callable[[ModelRequest], ModelResponse]:
    """Starts the helper in the background, waits, answers its question, waits again."""

    def respond(request: ModelRequest) -> ModelResponse:
        results = _tool_results(request)
        if not results:
            return _call("Task", agent="helper", task="paint the shed", background=True)
        last = _last_result(request)
        if len(results) == 1:
            return _call("TaskWait", ids=[last["run_id"]])
        if "runs" in last and "question" in last["runs"][0]:
            run = last["runs"][0]
            assert run["question"]["text"] == QUESTION
            return _call("TaskMessage", id=run["run_id"], message=answer)
        if "delivery" in last:
            return _call("TaskWait", ids=[last["run_id"]], timeout=30)
        return ModelResponse(text=last["runs"][0]["result"]["text"])

    return respond


def _by_agent(**answers: Callable[[ModelRequest], ModelResponse]) -> FunctionModel:
    async def respond(request: ModelRequest) -> ModelResponse:
        return answers[request.agent](request)

    return FunctionModel(respond)


def _agents(project: Project) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[helper]")
    project.agent("helper", tools="Read", may_ask_parent="true")


@pytest.mark.anyio
async def test_the_parents_taskwait_returns_the_question_and_its_taskmessage_answers_it(
    project: Project,
) -> None:
    _agents(project)
    model = _by_agent(lead=_lead("green"), helper=_helper)
    with anyio.fail_after(30):
        async with project.runtime(model) as runtime:
            events = runtime.events()
            result = await runtime.run(SubagentStartRequest("lead", "get the shed painted"))
            kinds = []
            async for event in events:
                kinds.append((event.agent, event.kind, dict(event.data)))
                if event.agent == "lead" and event.kind == "completed":
                    break
    assert result.status == "completed"
    assert json.loads(result.text.removeprefix("painted it: ")) == {
        "answer": "green",
        "from": result.run_id,
    }
    asked = [data for agent, kind, data in kinds if kind == "question"]
    answered = [data for agent, kind, data in kinds if kind == "answer"]
    assert [a["text"] for a in asked] == [QUESTION]
    assert [a["question"] for a in answered] == [asked[0]["question"]]
    assert answered[0]["from"] == result.run_id


@pytest.mark.anyio
async def test_only_a_definition_that_allows_it_sees_askparent(project: Project) -> None:
    project.agent("helper", tools="Read", may_ask_parent="true")
    project.agent("plain", tools="Read")
    release = anyio.Event()

    async def respond(request: ModelRequest) -> ModelResponse:
        await release.wait()
        return ModelResponse(text="done")

    async with project.runtime(FunctionModel(respond)) as runtime:
        asking = await runtime.start(SubagentStartRequest("helper", "go"))
        plain = await runtime.start(SubagentStartRequest("plain", "go"))
        assert "AskParent" in runtime.view(asking.run_id).visible
        assert "AskParent" not in runtime.view(plain.run_id).visible
        release.set()


@pytest.mark.anyio
async def test_a_top_level_run_asking_gets_no_parent(project: Project) -> None:
    project.agent("helper", tools="Read", may_ask_parent="true")
    model = _by_agent(helper=_helper)
    async with project.runtime(model) as runtime:
        result = await runtime.run(SubagentStartRequest("helper", "paint"))
    assert result.status == "completed"
    answer = model.requests[-1].messages[-1]
    assert answer.role == "tool" and "no-parent" in answer.content


@pytest.mark.anyio
async def test_an_answer_to_a_run_with_no_open_question_is_refused(project: Project) -> None:
    project.agent("helper", tools="Read")
    release = anyio.Event()

    async def respond(request: ModelRequest) -> ModelResponse:
        await release.wait()
        return ModelResponse(text="done")

    async with project.runtime(FunctionModel(respond)) as runtime:
        info = await runtime.start(SubagentStartRequest("helper", "go"))
        with pytest.raises(NoOpenQuestion):
            runtime.message(info.run_id, "blue", kind="answer")
        release.set()


def _blocked_lead(stuck: anyio.Event) -> Callable[[ModelRequest], Any]:
    """Starts the helper, waits for its question, then hangs until the runtime is closed."""

    async def respond(request: ModelRequest) -> ModelResponse:
        results = _tool_results(request)
        if not results:
            return _call("Task", agent="helper", task="paint the shed", background=True)
        if len(results) == 1:
            return _call("TaskWait", ids=[_last_result(request)["run_id"]])
        stuck.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return respond


@pytest.mark.anyio
async def test_a_question_survives_a_restart_and_the_answer_finishes_the_child(
    project: Project, tmp_path: Path
) -> None:
    _agents(project)
    db = tmp_path / "state.db"
    stuck = anyio.Event()
    lead = _blocked_lead(stuck)

    async def first(request: ModelRequest) -> ModelResponse:
        if request.agent == "lead":
            return await lead(request)
        return _helper(request)

    store = SQLiteStore(db)
    with anyio.fail_after(30):
        async with project.runtime(InProcessProvider(FunctionModel(first)), store=store) as rt:
            lead_info = await rt.start(SubagentStartRequest("lead", "get the shed painted"))
            await stuck.wait()
            (child,) = rt.runs(parent_id=lead_info.run_id)
            assert child.question is not None and child.question["text"] == QUESTION
            helper_id = child.run_id
    store.close()

    store = SQLiteStore(db, clock=after_leases_expire())
    model = _by_agent(helper=_helper)
    with anyio.fail_after(30):
        async with project.runtime(InProcessProvider(model), store=store) as runtime:
            question = runtime.question(helper_id)
            assert question is not None and question["text"] == QUESTION
            delivery = runtime.message(helper_id, "red", caller=lead_info.run_id)
            assert delivery.kind == "answer"
            await runtime.resume(helper_id, "your parent has answered")
            result = await runtime.wait(helper_id)
            assert runtime.question(helper_id) is None
    assert result.status == "completed"
    # Closing the runtime stopped the waiting call; the resumed child reads the answer.
    assert result.text.startswith("painted it from a notice: <parent_answer ")
    assert f'from="{lead_info.run_id}"' in result.text and "\nred\n" in result.text
    assert [i for i in store.pending_outbox() if i.recipient == helper_id] == []
    store.close()


@pytest.mark.anyio
async def test_a_parent_not_waiting_reads_the_question_as_a_notice_and_answers_it(
    project: Project,
) -> None:
    _agents(project)
    holder: dict[str, Any] = {}

    async def lead(request: ModelRequest) -> ModelResponse:
        results = _tool_results(request)
        if not results:
            return _call("Task", agent="helper", task="paint the shed", background=True)
        if len(results) == 1:
            helper_id = _last_result(request)["run_id"]
            holder["helper"] = helper_id
            while holder["runtime"].question(helper_id) is None:
                await anyio.lowlevel.checkpoint()
            return _call("Read", file_path="notes.txt")
        notices = [m.content for m in request.messages if m.content.startswith("<task_question ")]
        if len(results) == 2:
            assert len(notices) == 1 and QUESTION in notices[0]
            assert f'run_id="{holder["helper"]}"' in notices[0]
            return _call("TaskMessage", id=holder["helper"], message="yellow")
        if len(results) == 3:
            return _call("TaskWait", ids=[holder["helper"]], timeout=30)
        return ModelResponse(text=_last_result(request)["runs"][0]["result"]["text"])

    async def respond(request: ModelRequest) -> ModelResponse:
        return await lead(request) if request.agent == "lead" else _helper(request)

    with anyio.fail_after(30):
        async with project.runtime(FunctionModel(respond)) as runtime:
            holder["runtime"] = runtime
            result = await runtime.run(SubagentStartRequest("lead", "get the shed painted"))
    assert result.status == "completed"
    assert json.loads(result.text.removeprefix("painted it: "))["answer"] == "yellow"


@pytest.mark.anyio
async def test_a_parent_may_stop_a_child_that_waits_for_its_answer(project: Project) -> None:
    _agents(project)

    def lead(request: ModelRequest) -> ModelResponse:
        results = _tool_results(request)
        if not results:
            return _call("Task", agent="helper", task="paint the shed", background=True)
        last = _last_result(request)
        if len(results) == 1:
            return _call("TaskWait", ids=[last["run_id"]])
        if "runs" in last:
            return _call("TaskStop", id=last["runs"][0]["run_id"])
        return ModelResponse(text=last["status"])

    model = _by_agent(lead=lead, helper=_helper)
    with anyio.fail_after(30):
        async with project.runtime(model) as runtime:
            result = await runtime.run(SubagentStartRequest("lead", "get the shed painted"))
            (helper,) = [info for info in runtime.runs() if info.agent == "helper"]
    assert result.status == "completed" and result.text == "stopped"
    assert helper.status == "stopped" and helper.question is None


@pytest.mark.anyio
async def test_a_question_the_host_answers_first_reaches_the_busy_parent_no_more(
    project: Project,
) -> None:
    """The lead is busy in a model request when its child asks, so the question waits in the lead
    as a notice for its next turn boundary; the host answers first. The lead then never reads the
    question: it asks nothing any more."""
    _agents(project)
    busy, release = anyio.Event(), anyio.Event()

    async def lead(request: ModelRequest) -> ModelResponse:
        results = _tool_results(request)
        if not results:
            return _call("Task", agent="helper", task="paint the shed", background=True)
        if len(results) == 1:
            busy.set()
            await release.wait()
            return _call("TaskWait", ids=[_last_result(request)["run_id"]], timeout=30)
        return ModelResponse(text="done")

    async def respond(request: ModelRequest) -> ModelResponse:
        if request.agent == "lead":
            return await lead(request)
        return _helper(request)

    model = FunctionModel(respond)
    with anyio.fail_after(30):
        async with project.runtime(model) as runtime:
            lead_info = await runtime.start(SubagentStartRequest("lead", "get the shed painted"))
            await busy.wait()
            while not (
                (children := runtime.runs(parent_id=lead_info.run_id))
                and children[0].question is not None
            ):
                await anyio.sleep(0.01)
            runtime.message(children[0].run_id, "green", kind="answer")
            release.set()
            result = await runtime.wait(lead_info.run_id)
    assert result.status == "completed"
    last = [r for r in model.requests if r.agent == "lead"][-1]
    assert not any("<task_question" in m.content for m in last.messages)
