"""The lineage ledger (seed 002): one edge per delegation with its status and summary, best
effort (a store that refuses the edge never fails a spawn), shown by ``membrane lineage``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane.cli.app import main
from membrane.errors import StoreError
from membrane.json_types import JSONObject
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import InProcessProvider, SubagentStartRequest
from membrane.store import LineageEdge, SQLiteStore, brief_digest
from membrane.testing import FunctionModel

from .conftest import Project

pytestmark = pytest.mark.anyio


class EdgeRefusingStore(SQLiteStore):
    """A store whose lineage writes fail, as a full or read-only ledger table would."""

    def record_edge(
        self,
        *,
        parent_id: str,
        child_id: str,
        child_role: str,
        brief_digest: str,
        spawn_fingerprint: JSONObject,
    ) -> LineageEdge:
        raise StoreError("the ledger refuses writes")


def _lead_model(tasks: list[str]) -> FunctionModel:
    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent != "lead":
            if "fail" in request.messages[0].content:
                return ModelResponse(text="", stop_reason="error")
            return ModelResponse(text=f"found it for {request.messages[0].content}")
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n < len(tasks):
            call = ToolCall(f"t{n}", "Task", {"agent": "worker", "task": tasks[n]})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        return ModelResponse(text="lead done")

    return FunctionModel(answer)


@pytest.fixture
def agents(project: Project) -> Project:
    project.agent("lead", allowed_subagents="[worker]")
    project.agent("worker")
    return project


async def test_edges_record_who_spawned_whom_and_how_each_ended(
    agents: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "state.db"
    store = SQLiteStore(db)
    model = _lead_model(["survey the api", "fail loudly"])
    async with agents.runtime(InProcessProvider(model), store=store) as runtime:
        with anyio.fail_after(20):
            lead = await runtime.run(SubagentStartRequest("lead", "lead"))
    store.close()
    assert lead.text == "lead done"

    assert main(["lineage", "--json", "--state", str(db)]) == 0
    (root,) = json.loads(capsys.readouterr().out)["roots"]
    assert (root["run_id"], root["agent"], root["status"]) == (lead.run_id, "lead", "completed")
    good, bad = root["children"]
    edge: dict[str, Any] = good["edge"]
    assert (edge["status"], edge["agent"]) == ("completed", "worker")
    assert edge["brief_digest"] == brief_digest("survey the api")
    assert edge["summary"] == "found it for survey the api"
    assert {"provider", "model", "thinking"} <= set(edge["spawn_fingerprint"])
    assert edge["spawn_fingerprint"]["routing_key"] == "default"  # the host's own model
    assert bad["edge"]["status"] == "failed" and bad["edge"]["summary"]

    assert main(["lineage", good["run_id"], "--json", "--state", str(db)]) == 0
    (sub,) = json.loads(capsys.readouterr().out)["roots"]
    assert sub["run_id"] == good["run_id"] and sub["children"] == []
    assert main(["lineage", "--state", str(db)]) == 0
    text = capsys.readouterr().out
    assert "[completed]" in text and "[failed]" in text and lead.run_id in text
    assert main(["lineage", "nope", "--state", str(db)]) == 3


async def test_a_store_that_refuses_the_edge_never_fails_the_spawn(
    agents: Project, tmp_path: Path
) -> None:
    store = EdgeRefusingStore(tmp_path / "state.db")
    model = _lead_model(["survey the api"])
    async with agents.runtime(InProcessProvider(model), store=store) as runtime:
        with anyio.fail_after(20):
            lead = await runtime.run(SubagentStartRequest("lead", "lead"))
    assert lead.text == "lead done"
    assert [h.agent for h in store.list_sessions()] == ["lead", "worker"]
    assert all(h.status == "completed" for h in store.list_sessions())
    assert store.edges() == []
    store.close()


async def test_the_spawn_fingerprint_carries_the_routing_key_of_the_model_spec(
    project: Project, tmp_path: Path
) -> None:
    project.settings = dataclasses.replace(
        project.settings, model_aliases={"fast": "openai:gpt-4o-mini"}
    )
    project.agent("lead", allowed_subagents="[worker, pinned]")
    project.agent("worker", model="fast")
    project.agent("pinned", model="anthropic:claude-haiku-4-5")
    store = SQLiteStore(tmp_path / "state.db")

    async def answer(request: ModelRequest) -> ModelResponse:
        if request.agent != "lead":
            return ModelResponse(text="done")
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n < 2:
            call = ToolCall(f"t{n}", "Task", {"agent": ("worker", "pinned")[n], "task": "go"})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        return ModelResponse(text="lead done")

    async with project.runtime(InProcessProvider(FunctionModel(answer)), store=store) as rt:
        with anyio.fail_after(20):
            await rt.run(SubagentStartRequest("lead", "lead"))
    keys = {e.child_role: e.spawn_fingerprint for e in store.edges()}
    assert keys["worker"]["model"] == "openai:gpt-4o-mini"  # the alias, read
    assert keys["worker"]["routing_key"] == "alias:fast -> openai:gpt-4o-mini"
    assert keys["pinned"]["routing_key"] == "spec -> anthropic:claude-haiku-4-5"
    store.close()
