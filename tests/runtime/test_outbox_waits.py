"""A parent's own wait and the outbox: the wait honours its timeout, a result it collects is
settled once it returns, and a provider whose ``notify`` fails never takes the runtime down."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import anyio
import pytest

from membrane.config.values import Settings
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import InProcessProvider, SubagentRuntime, SubagentStartRequest
from membrane.runtime.provider import ChildSpec, SetupCallback
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel

from .conftest import Project

pytestmark = pytest.mark.anyio


def _background_then_wait(
    *, timeout: float | None, before_wait: Callable[[str], Awaitable[object]] | None = None
) -> tuple[FunctionModel, anyio.Event]:
    """``lead`` starts ``worker`` in the background, then waits for it with ``TaskWait``
    (after ``before_wait(worker_run_id)``, when given)."""
    release_other = anyio.Event()
    waits: list[float] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "worker":
            return ModelResponse(text="worker report")
        if request.agent == "other":
            await release_other.wait()
            return ModelResponse(text="other done")
        results = [m for m in request.messages if m.role == "tool"]
        if not results:
            call = ToolCall("t1", "Task", {"agent": "worker", "task": "s", "background": True})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        if len(results) == 1:
            run_id = json.loads(results[0].content)["run_id"]
            if before_wait is not None:
                await before_wait(run_id)
            arguments: dict[str, object] = {"ids": [run_id]}
            if timeout is not None:
                arguments["timeout"] = timeout
            return ModelResponse(tool_calls=(ToolCall("t2", "TaskWait", arguments),))
        waits.append(1.0)
        return ModelResponse(text="lead done")

    return FunctionModel(answer), release_other


async def test_a_task_wait_timeout_is_honoured_while_an_unrelated_run_holds_the_lent_slot(
    project: Project,
) -> None:
    project.settings = Settings(max_concurrency=1)
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker")
    project.agent("other")
    model, release_other = _background_then_wait(timeout=0.05)
    async with project.runtime(model) as runtime:
        lead = await runtime.start(SubagentStartRequest("lead", "go", background=True))
        await runtime.start(SubagentStartRequest("other", "x", background=True))
        # ``other`` never ends until released: the lead's wait must still come back.
        with anyio.fail_after(20):
            result = await runtime.wait(lead.run_id)
        assert result.status == "completed"
        release_other.set()


@pytest.mark.parametrize("ended_first", [False, True], ids=["waiting", "ended-first"])
async def test_a_result_the_parents_wait_collected_leaves_no_pending_notice(
    project: Project, ended_first: bool
) -> None:
    """Also when the child ended before the parent began to wait: its notice, already queued
    in the parent, is taken back, so the parent hears the result once, through the wait."""
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker")
    runtimes: list[SubagentRuntime] = []

    async def until_it_ended(run_id: str) -> object:
        return await runtimes[0].wait(run_id)

    model, _ = _background_then_wait(
        timeout=None, before_wait=until_it_ended if ended_first else None
    )
    store = SQLiteStore(project.home / "state.db")
    async with project.runtime(model, store=store) as runtime:
        runtimes.append(runtime)
        with anyio.fail_after(20):
            result = await runtime.run(SubagentStartRequest("lead", "go"))
        assert result.status == "completed"
        assert runtime.outbox.pending() == []
    lead_messages = [m["content"] for m in store.transcript(result.run_id)]
    assert not any(text.startswith("<task_notification") for text in lead_messages)
    assert sum("worker report" in text for text in lead_messages) == 1


async def test_a_provider_whose_notify_fails_leaves_the_notice_pending_not_the_runtime_broken(
    project: Project,
) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker")
    hold = anyio.Event()

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "worker":
            return ModelResponse(text="worker report")
        if not [m for m in request.messages if m.role == "tool"]:
            task = ToolCall("t1", "Task", {"agent": "worker", "task": "s", "background": True})
            return ModelResponse(tool_calls=(task, ToolCall("h", "Read", {})))
        return ModelResponse(text="lead done")

    class BrokenTransport:
        """The lead's child, except that delivering a notice to it always fails."""

        def __init__(self, inner: object) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> object:
            return getattr(self._inner, name)

        def notify(self, message: str, *, on_delivered: object = None) -> bool:
            raise ConnectionResetError("the parent's transport went away")

    class Flaky(InProcessProvider):
        async def create(self, request: ChildSpec, setup: SetupCallback):  # type: ignore[no-untyped-def]
            child = await super().create(request, setup)
            return BrokenTransport(child) if request.agent == "lead" else child

    from .conftest import echo_tool

    async def held(arguments: object, context: object) -> str:
        await hold.wait()
        return "held"

    from dataclasses import replace

    project.registry.register(replace(echo_tool("Read"), handler=held), replace=True)
    store = SQLiteStore(project.home / "state.db")
    async with project.runtime(Flaky(FunctionModel(answer)), store=store) as runtime:
        with anyio.fail_after(20):
            lead = await runtime.start(SubagentStartRequest("lead", "go"))
            worker = None
            while worker is None or worker.status != "completed":
                await anyio.sleep(0.01)
                children = runtime.runs(parent_id=lead.run_id)
                worker = children[0] if children else None
            hold.set()
            result = await runtime.wait(lead.run_id)
        assert result.status == "completed"
        pending = runtime.outbox.pending(lead.run_id)
        assert [item.payload["run_id"] for item in pending] == [worker.run_id]
