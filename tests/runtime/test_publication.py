"""Publication races: a child built while its parent ends, or while the runtime closes, is
rolled back (the provider's ``discard()`` included) and never published."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from membrane.errors import InvalidRequest
from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import InProcessProvider, SubagentStartRequest
from membrane.runtime.provider import ChildSpec, SetupCallback
from membrane.testing import FunctionModel

from .conftest import Project


class _Tracked:
    """A built child that records ``discard()`` and otherwise is the provider's own."""

    def __init__(self, child: Any, discarded: list[str], run_id: str) -> None:
        self._child = child
        self._discarded = discarded
        self._run_id = run_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._child, name)

    def discard(self) -> None:
        self._discarded.append(self._run_id)
        inner = getattr(self._child, "discard", None)
        if callable(inner):
            inner()


class _Gated(InProcessProvider):
    """Builds ``gated`` agents only once ``gate`` is set."""

    def __init__(self, model: FunctionModel, *, gated: str) -> None:
        super().__init__(model)
        self.gate = anyio.Event()
        self.building = anyio.Event()
        self.discarded: list[str] = []
        self._gated = gated

    async def create(self, request: ChildSpec, setup: SetupCallback) -> Any:
        if request.agent == self._gated:
            self.building.set()
            await self.gate.wait()
        child = await super().create(request, setup)
        return _Tracked(child, self.discarded, request.run_id)


def _model(provider: list[_Gated]) -> FunctionModel:
    """Workers run until stopped; a lead answers once the gated child is being built."""

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent == "worker":
            await anyio.sleep_forever()
        await provider[0].building.wait()
        return ModelResponse(text=f"{request.agent} done")

    return FunctionModel(answer)


@pytest.mark.anyio
async def test_a_child_built_while_its_parent_ended_is_rolled_back_not_published(
    project: Project,
) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker", tools="Grep")
    holder: list[_Gated] = []
    provider = _Gated(_model(holder), gated="worker")
    holder.append(provider)
    failures: list[BaseException] = []
    with anyio.fail_after(10):
        async with project.runtime(provider) as runtime:
            lead = await runtime.start(SubagentStartRequest("lead", "go", background=True))

            async def start_child() -> None:
                request = SubagentStartRequest("worker", "w", parent_id=lead.run_id)
                try:
                    await runtime.start(request)
                except InvalidRequest as exc:
                    failures.append(exc)

            async with anyio.create_task_group() as group:
                group.start_soon(start_child)
                await provider.building.wait()
                assert (await runtime.wait(lead.run_id)).status == "completed"
                provider.gate.set()
            agents = [info.agent for info in runtime.runs()]
            stored = [header.agent for header in runtime.store.list_sessions()]
    assert [type(exc) for exc in failures] == [InvalidRequest]
    assert "ended" in str(failures[0])
    assert agents == ["lead"] and stored == ["lead"]
    assert len(provider.discarded) == 1


@pytest.mark.anyio
async def test_a_start_racing_the_runtimes_close_is_refused_and_rolled_back(
    project: Project,
) -> None:
    project.agent("worker", tools="Grep")
    holder: list[_Gated] = []
    provider = _Gated(_model(holder), gated="worker")
    holder.append(provider)
    runtime = project.runtime(provider)
    failures: list[BaseException] = []

    async def start_child() -> None:
        try:
            await runtime.start(SubagentStartRequest("worker", "w"))
        except InvalidRequest as exc:
            failures.append(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            async with runtime:
                group.start_soon(start_child)
                await provider.building.wait()
            provider.gate.set()
    assert [type(exc) for exc in failures] == [InvalidRequest]
    assert "closing" in str(failures[0])
    assert runtime.runs() == [] and runtime.store.list_sessions() == []
    assert len(provider.discarded) == 1
