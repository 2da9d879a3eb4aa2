"""Fencing by lease generation: a process that stalled past its lease while another owner
took the run over never writes the run's end over the new holder's (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane import ModelRequest, ModelResponse, Tool, ToolContext
from membrane.lowlevel import PostgresStore, Store
from membrane.models.base import ToolCall
from membrane.runtime import InProcessProvider, SubagentStartRequest
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel, stored_lease
from membrane.tools.registry import ToolRegistry

from .conftest import Project

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened: Store
    if request.param == "sqlite":
        opened = SQLiteStore(tmp_path / "state.db")
    else:
        opened = PostgresStore(request.getfixturevalue("postgres_url"))
    yield opened
    opened.close()


async def test_a_run_taken_over_by_another_owner_is_not_ended_in_the_store_by_the_stale_one(
    project: Project, store: Store
) -> None:
    project.agent("worker", tools="Read")
    entered = anyio.Event()

    async def hold(arguments: Mapping[str, Any], context: ToolContext) -> str:
        entered.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    project.registry = ToolRegistry()
    project.registry.register(
        Tool(name="Read", description="Read.", input_schema={"type": "object"}, handler=hold)
    )

    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(tool_calls=(ToolCall("c", "Read", {}),), stop_reason="tool_calls")

    async with project.runtime(InProcessProvider(FunctionModel(answer)), store=store) as runtime:
        with anyio.fail_after(30):
            info = await runtime.start(SubagentStartRequest("worker", "w", background=True))
            first = stored_lease(store, info.run_id)
            assert first is not None
            await entered.wait()
            # This process stalled past its lease, and another one took the run over.
            store.expire_owner_leases(runtime.sweeper.owner)
            taken = store.claim_lease(info.run_id, owner="other-host:2:live", ttl=60)
            assert taken.generation == first.generation + 1
            runtime.sweeper.renew()
            assert (await runtime.wait(info.run_id)).status == "stopped"
    header = store.get_header(info.run_id)
    assert header is not None and header.status == "running"  # the new holder's to end
    assert "stopped" not in {event.kind for event in store.events(session_id=info.run_id)}
    held = stored_lease(store, info.run_id)
    assert held is not None and (held.owner, held.generation) == (taken.owner, taken.generation)
