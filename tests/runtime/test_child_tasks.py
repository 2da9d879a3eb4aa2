"""The tasks that drive a runtime's children: plain tasks on asyncio, each joined when the
runtime closes, and a failure that leaves one cancels the host and is raised, as a task
group's would be."""

from __future__ import annotations

import asyncio

import anyio
import pytest
from tests.runtime.conftest import Project, waiting_model

from membrane.config.values import Settings
from membrane.runtime import SubagentStartRequest
from membrane.runtime.child_tasks import ChildTasks
from membrane.store import MemoryStore

pytestmark = pytest.mark.anyio


async def test_closing_the_runtime_ends_and_joins_every_child_task(project: Project) -> None:
    project.agent("worker", tools="Read")
    before = len(asyncio.all_tasks())
    project.settings = Settings(max_concurrency=5)
    runtime = project.runtime(waiting_model(anyio.Event()), store=MemoryStore())
    with anyio.fail_after(30):
        async with runtime:
            ids = [
                (
                    await runtime.start(SubagentStartRequest("worker", f"job {i}", background=True))
                ).run_id
                for i in range(12)
            ]
            await anyio.wait_all_tasks_blocked()
            statuses = [runtime.get(run_id).status for run_id in ids]
            assert statuses.count("running") == 5 and statuses.count("queued") == 7
    # Running children were stopped, queued ones ended without starting; no task is left.
    assert {runtime.get(run_id).status for run_id in ids} == {"stopped"}
    assert len(asyncio.all_tasks()) == before


async def test_a_failure_that_leaves_a_child_task_cancels_the_group_and_is_raised() -> None:
    async def fail(message: str) -> None:
        await anyio.sleep(0)
        raise LookupError(message)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            tasks = ChildTasks(group, asyncio.get_running_loop())
            tasks.spawn(fail, "the finish failed")
            with pytest.raises(anyio.get_cancelled_exc_class()):
                await anyio.sleep_forever()  # the host's body, cancelled by the failure
            with pytest.raises(BaseExceptionGroup) as caught:
                await tasks.join()
    errors = [repr(error) for error in caught.value.exceptions]
    assert errors == ["LookupError('the finish failed')"]
    assert group.cancel_scope.cancel_called


async def test_join_waits_for_tasks_spawned_while_it_waits() -> None:
    ended: list[str] = []
    release = anyio.Event()

    async def later(name: str) -> None:
        await anyio.sleep(0)
        ended.append(name)

    async def first(name: str) -> None:
        await release.wait()
        tasks.spawn(later, "second")
        ended.append(name)

    async with anyio.create_task_group() as group:
        tasks = ChildTasks(group, asyncio.get_running_loop())
        tasks.spawn(first, "first")
        group.start_soon(_set_soon, release)
        with anyio.fail_after(10):
            await tasks.join()
        assert ended == ["first", "second"]
        await tasks.join()  # nothing left: returns at once


async def _set_soon(event: anyio.Event) -> None:
    await anyio.wait_all_tasks_blocked()
    event.set()
