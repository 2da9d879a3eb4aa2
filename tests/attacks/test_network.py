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
