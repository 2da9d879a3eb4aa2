"""The runtime's lifecycle: events to hosts and the store, waiting, stopping, steering, queueing,
and children ending with their parent."""

from __future__ import annotations

import anyio
import pytest

from membrane.config.values import Settings
from membrane.errors import InvalidRequest, UnknownRun
from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import LifecycleEvent, SubagentRuntime, SubagentStartRequest
from membrane.testing import FunctionModel, ScriptedModel

from .conftest import Project


def _sleepy() -> FunctionModel:
    """``sleeper`` runs never answer (until stopped); every other agent answers at once."""

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "sleeper":
            await anyio.sleep_forever()
        return ModelResponse(text=f"{request.agent} done")

    return FunctionModel(answer)


async def _events_until(stream: object, run_id: str, kinds: set[str]) -> list[LifecycleEvent]:
    seen: list[LifecycleEvent] = []
    with anyio.fail_after(10):
        async for event in stream:  # type: ignore[attr-defined]
            seen.append(event)
            if event.run_id == run_id and event.kind in kinds:
                return seen
    raise AssertionError("stream ended")


@pytest.mark.anyio
async def test_lifecycle_events_reach_the_stream_and_the_store_in_order(project: Project) -> None:
    project.agent("worker", tools="Read")
    model = ScriptedModel(
        {
            "agents": {
                "worker": [
                    {"tool_calls": [{"name": "Read", "arguments": {"path": "a"}}]},
                    {"tool_calls": [{"name": "Write", "arguments": {"path": "a"}}]},
                    {"text": "done"},
                ]
            }
        }
    )
    async with project.runtime(model) as runtime:
        stream = runtime.events()
        info = await runtime.start(SubagentStartRequest("worker", "task"))
        seen = await _events_until(stream, info.run_id, {"completed"})
        stream.close()
        stored = runtime.store.events(session_id=info.run_id)
    expected = [
        "published",
        "turn",
        "usage",
        "tool_call",
        "tool_result",
        "turn",
        "usage",
        "tool_call",
        "vetoed_call",
        "tool_result",
        "turn",
        "usage",
        "completed",
    ]
    assert [event.kind for event in seen] == expected
    assert [event.kind for event in stored] == expected
    assert [event.seq for event in seen] == [event.seq for event in stored]
    assert seen[-1].data["text"] == "done"


@pytest.mark.anyio
async def test_the_store_holds_the_header_and_the_final_result(project: Project) -> None:
    project.agent("worker")
    async with project.runtime(ScriptedModel({"default": [{"text": "fine"}]})) as runtime:
        result = await runtime.run(SubagentStartRequest("worker", "task", request_id="r-1"))
        header = runtime.store.get_header(result.run_id)
    assert header is not None
    assert (header.agent, header.status, header.delegation_depth) == ("worker", "completed", 0)
    assert header.request_id == "r-1"
    assert header.result is not None and header.result["text"] == "fine"


@pytest.mark.anyio
async def test_a_model_failure_ends_the_run_with_an_error_event(project: Project) -> None:
    project.agent("worker")
    model = ScriptedModel({"default": [{"error": "provider down"}]})
    async with project.runtime(model) as runtime:
        stream = runtime.events()
        info = await runtime.start(SubagentStartRequest("worker", "task"))
        seen = await _events_until(stream, info.run_id, {"completed", "error", "stopped"})
        stream.close()
        result = await runtime.wait(info.run_id)
    assert seen[-1].kind == "error"
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "model-error"


@pytest.mark.anyio
async def test_stop_ends_a_running_child_with_a_stopped_event(project: Project) -> None:
    project.agent("sleeper")
    async with project.runtime(_sleepy()) as runtime:
        stream = runtime.events()
        info = await runtime.start(SubagentStartRequest("sleeper", "wait"))
        await _events_until(stream, info.run_id, {"turn"})
        with anyio.fail_after(10):
            stopped = await runtime.stop(info.run_id)
        seen = await _events_until(stream, info.run_id, {"stopped"})
        stream.close()
    assert stopped.status == "stopped"
    assert seen[-1].kind == "stopped"
    assert runtime.store.get_header(info.run_id).status == "stopped"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_children_end_when_their_parent_ends(project: Project) -> None:
    project.agent("sleeper")
    async with project.runtime(_sleepy()) as runtime:
        parent = await runtime.start(SubagentStartRequest("sleeper", "parent"))
        child = await runtime.start(
            SubagentStartRequest("sleeper", "child", parent_id=parent.run_id, background=True)
        )
        grandchild = await runtime.start(
            SubagentStartRequest("sleeper", "grandchild", parent_id=child.run_id)
        )
        with anyio.fail_after(10):
            await runtime.stop(parent.run_id)
            await runtime.wait(child.run_id)
            await runtime.wait(grandchild.run_id)
        assert runtime.get(child.run_id).status == "stopped"
        assert runtime.get(grandchild.run_id).status == "stopped"


@pytest.mark.anyio
async def test_closing_the_runtime_stops_every_child(project: Project) -> None:
    project.agent("sleeper")
    runtime = project.runtime(_sleepy())
    with anyio.fail_after(10):
        async with runtime:
            info = await runtime.start(SubagentStartRequest("sleeper", "wait"))
    assert runtime.get(info.run_id).status == "stopped"


@pytest.mark.anyio
async def test_a_concurrency_cap_queues_background_starts_and_reports_their_place(
    project: Project,
) -> None:
    project.agent("sleeper")
    project.settings = Settings(max_concurrency=2)
    async with project.runtime(_sleepy()) as runtime:
        infos = [
            await runtime.start(SubagentStartRequest("sleeper", f"job {i}", background=True))
            for i in range(4)
        ]
        assert [i.status for i in infos] == ["running", "running", "queued", "queued"]
        assert [i.queue_position for i in infos] == [None, None, 1, 2]
        assert runtime.store.get_header(infos[2].run_id).status == "queued"  # type: ignore[union-attr]
        foreground = await runtime.start(SubagentStartRequest("sleeper", "now"))
        assert foreground.status == "running"
        with anyio.fail_after(10):
            await runtime.stop(infos[0].run_id)
        assert runtime.get(infos[2].run_id).status == "running"
        assert runtime.get(infos[3].run_id).queue_position == 1
        with anyio.fail_after(10):
            stopped = await runtime.stop(infos[3].run_id)
        assert (stopped.status, stopped.queue_position) == ("stopped", None)


@pytest.mark.anyio
async def test_a_wait_that_times_out_or_is_cancelled_leaves_the_child_running(
    project: Project,
) -> None:
    project.agent("sleeper")
    async with project.runtime(_sleepy()) as runtime:
        info = await runtime.start(SubagentStartRequest("sleeper", "wait", background=True))
        states = await runtime.wait_all([info.run_id], timeout=0.01)
        assert [s.status for s in states] == ["running"]
        with anyio.move_on_after(0.01):
            await runtime.wait(info.run_id)
        assert runtime.get(info.run_id).status == "running"


@pytest.mark.anyio
async def test_a_caller_sees_only_its_own_children(project: Project) -> None:
    project.agent("sleeper")
    async with project.runtime(_sleepy()) as runtime:
        one = await runtime.start(SubagentStartRequest("sleeper", "one"))
        two = await runtime.start(SubagentStartRequest("sleeper", "two"))
        child = await runtime.start(SubagentStartRequest("sleeper", "c", parent_id=one.run_id))
        assert [i.run_id for i in runtime.runs(parent_id=one.run_id)] == [child.run_id]
        assert runtime.runs(parent_id=two.run_id) == []
        with pytest.raises(UnknownRun):
            await runtime.wait(child.run_id, caller=two.run_id)
        with pytest.raises(UnknownRun):
            await runtime.stop(child.run_id, caller=two.run_id)
        with pytest.raises(UnknownRun):
            runtime.steer(child.run_id, "hello", caller=two.run_id)
        assert runtime.get(child.run_id, caller=one.run_id).run_id == child.run_id


@pytest.mark.anyio
async def test_a_steering_message_sent_before_the_first_turn_follows_the_task(
    project: Project,
) -> None:
    project.agent("worker")
    model = ScriptedModel({"default": [{"text": "ok"}]})
    async with project.runtime(model) as runtime:
        info = await runtime.start(SubagentStartRequest("worker", "the task"))
        runtime.steer(info.run_id, "focus on tests")
        await runtime.wait(info.run_id)
        with pytest.raises(InvalidRequest):
            runtime.steer(info.run_id, "too late")
    contents = [m.content for m in model.requests[0].messages]
    assert contents == ["the task", "focus on tests"]


@pytest.mark.anyio
async def test_starting_outside_the_runtime_context_is_refused(project: Project) -> None:
    project.agent("worker")
    runtime: SubagentRuntime = project.runtime(ScriptedModel({"default": [{"text": "ok"}]}))
    with pytest.raises(InvalidRequest):
        await runtime.start(SubagentStartRequest("worker", "task"))
    assert runtime.store.list_sessions() == []
