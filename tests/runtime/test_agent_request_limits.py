"""A definition's own model limits (``max_concurrent_requests``, ``requests_per_minute``) hold
every run of that agent, together, inside whatever the endpoint allows; other agents are not
held by them. Operation order, no timing: each request counts who else is in flight."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from membrane.agents.catalog import Catalog
from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import SubagentStartRequest
from membrane.testing import FunctionModel

from .conftest import Project


def _counting_model(busiest: dict[str, int]) -> FunctionModel:
    """Answers after many scheduling rounds, noting the most requests of each agent in
    flight at once."""
    in_flight: dict[str, int] = {}

    async def respond(request: ModelRequest) -> ModelResponse:
        agent = request.agent
        in_flight[agent] = in_flight.get(agent, 0) + 1
        busiest[agent] = max(busiest.get(agent, 0), in_flight[agent])
        for _ in range(50):
            await anyio.lowlevel.checkpoint()
        in_flight[agent] -= 1
        return ModelResponse(text="done")

    return FunctionModel(respond)


async def _three_runs_each(project: Project, busiest: dict[str, int]) -> None:
    async with (
        project.runtime(_counting_model(busiest)) as runtime,
        anyio.create_task_group() as group,
    ):
        for agent in ("careful", "free"):
            for n in range(3):
                group.start_soon(runtime.run, SubagentStartRequest(agent, f"part {n}"))


@pytest.mark.anyio
async def test_max_concurrent_requests_holds_all_runs_of_the_agent_together(
    project: Project,
) -> None:
    project.agent("careful", tools="Read", max_concurrent_requests="1")
    project.agent("free", tools="Read")
    busiest: dict[str, int] = {}
    with anyio.fail_after(30):
        await _three_runs_each(project, busiest)
    assert busiest == {"careful": 1, "free": 3}


def test_the_limits_are_read_from_the_file_and_a_bad_one_fails_it(project: Project) -> None:
    project.agent("paced", requests_per_minute="30", maxConcurrentRequests="2")
    project.agent("broken", requests_per_minute="fast")
    catalog = Catalog(project=project.root, home=project.home)
    paced = catalog.get("paced")
    assert paced is not None
    assert (paced.requests_per_minute, paced.max_concurrent_requests) == (30, 2)
    assert catalog.get("broken") is None
    assert any("requests_per_minute" in str(problem) for problem in catalog.errors)
