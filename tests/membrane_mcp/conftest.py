"""A project with MCP servers in its settings, opened as a host opens it, and a runtime on it."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from membrane.extensions.hooks import ExtensionHooks
from membrane.mcp import McpServers
from membrane.models.base import Message, ModelRequest, ModelResponse
from membrane.runtime import InProcessProvider, RuntimeOptions, SubagentRuntime
from membrane.testing import FunctionModel, MemoryStore
from membrane.workspace import Workspace
from project_support import agent_file

HERE = Path(__file__).resolve().parent
DYNAMIC_SERVER = HERE / "dynamic_server.py"

TIME_SERVER = {
    "command": sys.executable,
    "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
}
DYNAMIC = {"command": sys.executable, "args": [str(DYNAMIC_SERVER)], "timeout": 20}


def toml_table(name: str, entry: Mapping[str, object]) -> str:
    lines = [f"[mcp_servers.{name}]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in entry.items()]
    return "\n".join(lines) + "\n"


@dataclass
class McpProject:
    root: Path
    home: Path
    servers: dict[str, Mapping[str, object]] = field(default_factory=dict)

    def agent(self, name: str, body: str = "Do the task.", **frontmatter: object) -> None:
        agent_file(self.root, name, body, **frontmatter)

    def server(self, name: str, entry: Mapping[str, object]) -> None:
        self.servers[name] = entry
        config = self.root / ".membrane" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(
            "".join(toml_table(n, e) for n, e in self.servers.items()), encoding="utf-8"
        )

    @asynccontextmanager
    async def runtime(
        self, answer: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> AsyncIterator[tuple[SubagentRuntime, McpServers]]:
        """The project opened as ``membrane run`` opens it: workspace, mounted servers, the
        in-process provider with the servers' ``session_start`` hooks, a runtime."""
        ws = Workspace.open(self.root, home=self.home)
        hooks = ExtensionHooks.from_extensions(ws.extensions.values())
        async with McpServers.of(ws) as servers:
            servers.hooks(ws.catalog.definitions, into=hooks)
            provider = InProcessProvider(FunctionModel(answer), hooks=hooks)
            runtime = SubagentRuntime(
                catalog=ws.catalog,
                registry=ws.registry,
                provider=provider,
                store=MemoryStore(),
                options=RuntimeOptions(
                    settings=ws.settings, project=ws.project, deployment=ws.deployment()
                ),
            )
            async with runtime:
                yield runtime, servers


@pytest.fixture
def mcp_project(tmp_path: Path, isolated_home: Path) -> McpProject:
    root = tmp_path / "project"
    root.mkdir()
    return McpProject(root=root, home=isolated_home)


def last_tool_result(request: ModelRequest) -> Message:
    results = [m for m in request.messages if m.role == "tool"]
    assert results, "expected a tool result in the conversation"
    return results[-1]


def error_of(message: Message) -> dict[str, object]:
    assert message.is_error, message.content
    error = json.loads(message.content)["error"]
    assert isinstance(error, dict)
    return error
