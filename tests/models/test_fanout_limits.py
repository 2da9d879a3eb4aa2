"""A fan-out of fifty children on one rate-limited endpoint, through the real ``openai`` SDK: the
deployment's lane paces the requests so the server never sees a burst, every child finishes,
and nothing is charged twice."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from wire_server import RateLimitedServer

from membrane import SubagentRuntime, SubagentStartRequest
from membrane.models.specs import ModelRouter
from membrane.runtime import InProcessProvider
from membrane.runtime.workspace import Workspace

pytestmark = pytest.mark.anyio

CHILDREN = 50
#: The server's limit, and the pace the settings ask for: a little under it, as users set it,
#: so the jitter of a loaded machine between the client's send and the server's read is absorbed
#: (at 570 a machine at load 10 once saw 11 arrivals in one second; 540 leaves 10% to spare).
PER_SECOND = 10
REQUESTS_PER_MINUTE = 540


def _script(agent: str, turn: int, body: Mapping[str, Any]) -> dict[str, Any]:
    if agent == "kid":
        return {"text": "part done"}
    if turn == 0:
        calls = [
            {"name": "Task", "arguments": {"agent": "kid", "task": f"part {n}"}}
            for n in range(CHILDREN)
        ]
        return {"tool_calls": calls}
    return {"text": "all parts done"}


def _project(tmp_path: Path, server: RateLimitedServer) -> Path:
    project = tmp_path / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (project / ".membrane" / "config.toml").write_text(
        f'[models.local]\nprovider = "openai"\nmodel = "smollm2"\nbase_url = "{server.url}/v1"\n'
        f'api_key_env = "MEMBRANE_FANOUT_KEY"\nstream = false\n'
        f"requests_per_minute = {REQUESTS_PER_MINUTE}\n"
    )
    (agents / "lead.md").write_text(
        "---\nname: lead\ndescription: Splits.\nmodel: local\ntools: Read\n"
        "allowed_subagents: [kid]\n---\nSplit the work.\n"
    )
    (agents / "kid.md").write_text(
        "---\nname: kid\ndescription: Does a part.\nmodel: local\ntools: Read\n---\nDo it.\n"
    )
    return project


async def test_fifty_children_on_a_rate_limited_endpoint_finish_without_a_burst(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMBRANE_FANOUT_KEY", "sk-test")
    with RateLimitedServer(_script, per_second=PER_SECOND, flavour="vllm") as server:
        ws = Workspace.open(_project(tmp_path, server))
        router = ModelRouter.from_settings(ws.settings)
        runtime = SubagentRuntime.on_workspace(
            ws, InProcessProvider(router), store=ws.open_store(tmp_path / "state.db")
        )
        try:
            with anyio.fail_after(120):
                async with runtime:
                    lead = await runtime.run(SubagentStartRequest("lead", "Go."))
        finally:
            await router.aclose()
    assert lead.status == "completed", lead.error
    assert server.refused == []
    answered = len(server.arrivals) - server.limited
    assert answered == CHILDREN + 2  # each child's one turn, and the lead's two
    # Paced: the server never saw more than its limit in any one second.
    assert server.busiest_second() <= PER_SECOND
    # Every child finished, and each response was charged once (a 429 is charged nothing).
    assert lead.usage_total.input_tokens == 10 * answered
    last = server.requests[-1]["body"]["messages"]
    results = [m for m in last if m["role"] == "tool"]
    assert len(results) == CHILDREN
    assert all(json.loads(m["content"])["text"] == "part done" for m in results)
