"""The network inside the sandbox: off unless the definition or the deployment allows it."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import anyio
import pytest

from membrane.config.values import Settings
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest

from .support import runtime_for

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("frontmatter", "deployment", "allowed"),
    [("", False, False), ("network: true", False, True), ("network: false", True, True)],
    ids=["neither", "definition", "deployment"],
)
async def test_a_childs_commands_reach_the_network_only_when_allowed(
    os_sandbox: str, project: Path, frontmatter: str, deployment: bool, allowed: bool
) -> None:
    (project / ".membrane" / "agents" / "fetcher.md").write_text(
        f"---\nname: fetcher\ndescription: Fetches.\ntools: Read, Bash\n{frontmatter}\n---\nx\n"
    )
    settings = Settings(sandbox=os_sandbox, sandbox_network=deployment)  # type: ignore[arg-type]
    outputs: list[str] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        probe = (
            f"{sys.executable} -c \"import socket; socket.create_connection(('127.0.0.1', {port}),"
            " timeout=5); print('connected')\""
        )

        async def answer(request: ModelRequest) -> ModelResponse:
            done = [m for m in request.messages if m.role == "tool"]
            if not done:
                call = ToolCall("n", "Bash", {"command": probe})
                return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
            outputs.extend(json.loads(m.content)["stdout"] for m in done)
            return ModelResponse(text="done")

        runtime = runtime_for(project, answer, settings=settings)
        with anyio.fail_after(60):
            async with runtime, runtime.events() as events:
                result = await runtime.run(SubagentStartRequest("fetcher", "fetch"))
                async for event in events:
                    if event.kind == "published":
                        boundary = event.data["sandbox"]
                        break
    assert result.status == "completed"
    assert (outputs == ["connected\n"]) is allowed, outputs
    assert boundary["backend"] == os_sandbox and boundary["network"] is allowed


@pytest.mark.parametrize("own", ["", "network: true"], ids=["inherits", "asks-for-it"])
async def test_an_ancestors_network_false_closes_the_deployments_network_for_descendants(
    os_sandbox: str, project: Path, own: str
) -> None:
    """``sandbox_network = true`` opens the network for every agent, but a lead whose file
    says ``network: false`` closes it for everything it starts, its child's own
    ``network: true`` included (DESIGN rule 13); the lead's own commands keep the
    deployment's network."""
    agents = project / ".membrane" / "agents"
    (agents / "lead.md").write_text(
        "---\nname: lead\ndescription: Leads.\ntools: Read, Bash\nnetwork: false\n"
        "allowed_subagents: [fetcher]\n---\nx\n"
    )
    (agents / "fetcher.md").write_text(
        f"---\nname: fetcher\ndescription: Fetches.\ntools: Read, Bash\n{own}\n---\nx\n"
    )
    settings = Settings(sandbox=os_sandbox, sandbox_network=True)  # type: ignore[arg-type]
    outputs: dict[str, list[str]] = {"lead": [], "fetcher": []}
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(2)
        port = server.getsockname()[1]
        probe = (
            f"{sys.executable} -c \"import socket; socket.create_connection(('127.0.0.1', {port}),"
            " timeout=5); print('connected')\""
        )

        async def answer(request: ModelRequest) -> ModelResponse:
            done = [m for m in request.messages if m.role == "tool"]
            if not done:
                call = ToolCall("n", "Bash", {"command": probe})
                return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
            if request.agent == "lead" and len(done) == 1:
                call = ToolCall("t", "Task", {"agent": "fetcher", "task": "fetch"})
                outputs["lead"].append(json.loads(done[0].content)["stdout"])
                return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
            if request.agent == "fetcher":
                outputs["fetcher"].extend(json.loads(m.content)["stdout"] for m in done)
            return ModelResponse(text="done")

        runtime = runtime_for(project, answer, settings=settings)
        published: dict[str, dict[str, object]] = {}
        with anyio.fail_after(120):
            async with runtime:
                result = await runtime.run(SubagentStartRequest("lead", "lead"))
                for event in runtime.store.events():
                    if event.kind == "published":
                        published[event.session_id] = dict(event.data)
    assert result.status == "completed"
    assert outputs == {"lead": ["connected\n"], "fetcher": [""]}
    lead = published.pop(result.run_id)
    [fetcher] = published.values()
    assert lead["sandbox"]["network"] is True  # type: ignore[index]
    assert fetcher["sandbox"]["network"] is False  # type: ignore[index]
    assert fetcher["network"] == {"value": False, "source": f"ceiling:{result.run_id}"}
