"""The delegation tools Task, TaskWait, TaskList and TaskStop, as a scripted parent uses them."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from membrane.config.values import Settings
from membrane.models.base import Message, ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.testing import FunctionModel, ScriptedModel

from .conftest import Project, call_turn, tool_results


def _error_code(message: Message) -> str | None:
    return json.loads(message.content)["error"]["code"] if message.is_error else None


@pytest.mark.anyio
async def test_a_foreground_task_returns_the_childs_result_inline(project: Project) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker", tools="Grep")
    model = ScriptedModel(
        {
            "agents": {
                "lead": [call_turn("Task", agent="worker", task="count TODOs"), {"text": "ok"}],
                "worker": [{"text": "7 TODOs"}],
            }
        }
    )
    async with project.runtime(model) as runtime:
        result = await runtime.run(SubagentStartRequest("lead", "lead"))
        runs = runtime.runs()
    [answer] = tool_results(model, "lead")
    data = json.loads(answer.content)
    assert (data["status"], data["text"]) == ("completed", "7 TODOs")
    assert result.status == "completed"
    assert [(r.agent, r.depth, r.parent_id) for r in runs] == [
        ("lead", 0, None),
        ("worker", 1, result.run_id),
    ]
    worker_request = next(r for r in model.requests if r.agent == "worker")
    assert worker_request.messages[0].content == "count TODOs"


@pytest.mark.anyio
async def test_a_background_task_returns_at_once_and_its_completion_reaches_the_parent(
    project: Project,
) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker")
    finished = anyio.Event()

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "worker":
            return ModelResponse(text="background result")
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn == 0:
            call = ToolCall("t1", "Task", {"agent": "worker", "task": "x", "background": True})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        if turn == 1:
            with anyio.fail_after(10):
                await finished.wait()
            return ModelResponse(tool_calls=(ToolCall("t2", "TaskList", {}),))
        return ModelResponse(text="lead done")

    model = FunctionModel(answer)
    async with project.runtime(model) as runtime:
        stream = runtime.events()

        async def watch() -> None:
            async for event in stream:
                if event.agent == "worker" and event.kind == "completed":
                    finished.set()
                    return

        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            result = await runtime.run(SubagentStartRequest("lead", "lead"))
        stream.close()
    started = json.loads(tool_results(model, "lead")[0].content)
    assert started["status"] in ("running", "queued") and started["background"] is True
    last = [r for r in model.requests if r.agent == "lead"][-1]
    notices = [m.content for m in last.messages if m.role == "user"]
    assert any(started["run_id"] in n and "background result" in n for n in notices)
    assert result.text == "lead done"


@pytest.mark.anyio
async def test_task_wait_list_and_stop_manage_the_parents_own_children(project: Project) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[worker, sleeper]")
    project.agent("worker")
    project.agent("sleeper")
    ids: dict[str, str] = {}

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "worker":
            return ModelResponse(text="worked")
        if request.agent == "sleeper":
            await anyio.sleep_forever()
        results = [json.loads(m.content) for m in request.messages if m.role == "tool"]
        step = len(results)
        if step == 0:
            return _calls(
                ("Task", {"agent": "worker", "task": "w", "background": True}),
                ("Task", {"agent": "sleeper", "task": "s", "background": True}),
            )
        if step == 2:
            ids["worker"], ids["sleeper"] = results[0]["run_id"], results[1]["run_id"]
            return _calls(("TaskWait", {"ids": [ids["worker"]], "timeout": 10}))
        if step == 3:
            return _calls(("TaskWait", {"ids": [ids["sleeper"]], "timeout": 0}))
        if step == 4:
            return _calls(("TaskList", {}))
        if step == 5:
            return _calls(("TaskStop", {"id": ids["sleeper"]}))
        if step == 6:
            return _calls(("TaskWait", {"ids": ["not-mine"]}))
        return ModelResponse(text="done")

    model = FunctionModel(answer)
    async with project.runtime(model) as runtime:
        with anyio.fail_after(20):
            await runtime.run(SubagentStartRequest("lead", "lead"))
    results = tool_results(model, "lead")
    waited = json.loads(results[2].content)["runs"]
    assert [(r["run_id"], r["status"]) for r in waited] == [(ids["worker"], "completed")]
    assert waited[0]["result"]["text"] == "worked"
    timed_out = json.loads(results[3].content)["runs"]
    assert [r["status"] for r in timed_out] == ["running"]
    listed = json.loads(results[4].content)["runs"]
    assert {r["run_id"]: r["status"] for r in listed} == {
        ids["worker"]: "completed",
        ids["sleeper"]: "running",
    }
    assert json.loads(results[5].content)["status"] == "stopped"
    assert _error_code(results[6]) == "unknown-run"


_ids = iter(range(1_000_000))


def _calls(*calls: tuple[str, dict[str, Any]]) -> ModelResponse:
    return ModelResponse(
        tool_calls=tuple(ToolCall(f"call-{next(_ids)}", name, args) for name, args in calls),
        stop_reason="tool_calls",
    )


@pytest.mark.anyio
async def test_at_the_cap_the_tool_stays_visible_and_a_start_is_an_errored_result(
    project: Project,
) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[lead]")
    project.settings = Settings(max_depth=1)
    model = ScriptedModel(
        {"agents": {"lead": [call_turn("Task", agent="lead", task="deeper"), {"text": "stopped"}]}}
    )
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "top"))
        runs = runtime.runs()
        sessions = runtime.store.list_sessions()
    assert [r.depth for r in runs] == [0, 1]
    assert len(sessions) == 2
    at_cap = [r for r in model.requests if r.agent == "lead"][2]
    assert "Task" in [tool["name"] for tool in at_cap.tools]
    results = tool_results(model, "lead")
    codes = [_error_code(m) for m in results]
    assert codes.count("depth-limit-exceeded") == 1


@pytest.mark.anyio
async def test_a_subagent_outside_allowed_subagents_is_refused(project: Project) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker")
    project.agent("admin")
    model = ScriptedModel(
        {"agents": {"lead": [call_turn("Task", agent="admin", task="x"), {"text": "ok"}]}}
    )
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "lead"))
        assert len(runtime.runs()) == 1
    # `agent` is an enum of what the lead may start: the call is refused by Task's own schema,
    # and the refusal names only what it asked for and what it may start.
    [refused] = tool_results(model, "lead")
    assert _error_code(refused) == "tool-arguments-invalid"
    assert "is not one of ['worker']" in refused.content


@pytest.mark.anyio
async def test_task_arguments_are_checked_against_its_schema(project: Project) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker")
    model = ScriptedModel(
        {
            "agents": {
                "lead": [
                    call_turn("Task", agent="worker", task="x", max_turns=0),
                    call_turn("Task", agent="worker", task="x", priority="high"),
                    {"text": "ok"},
                ]
            }
        }
    )
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "lead"))
        assert len(runtime.runs()) == 1
    codes = [_error_code(m) for m in tool_results(model, "lead")]
    assert codes == ["tool-arguments-invalid", "tool-arguments-invalid"]


@pytest.mark.anyio
async def test_call_fields_of_task_reach_the_child(project: Project) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker")
    model = ScriptedModel(
        {
            "agents": {
                "lead": [
                    call_turn("Task", agent="worker", task="x", model="small", thinking="low"),
                    {"text": "ok"},
                ],
                "worker": [{"text": "w"}],
            }
        }
    )
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "lead"))
    worker = next(r for r in model.requests if r.agent == "worker")
    assert (worker.model, worker.thinking) == ("small", "low")
