"""Fixtures for the subagent runtime's tests: a temporary project with agent files, a live
registry of simple tools, and a factory for runtimes on it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane.agents.catalog import Catalog
from membrane.config.values import Settings
from membrane.models.base import Message, ModelRequest, ModelResponse
from membrane.runtime import InProcessProvider, Provider, RuntimeOptions, SubagentRuntime
from membrane.store.base import Store
from membrane.testing import FunctionModel, ScriptedModel
from membrane.tools.registry import ToolRegistry
from membrane.tools.spec import Tool, ToolContext
from project_support import agent_file


def after_leases_expire() -> Callable[[], float]:
    """A store clock an hour ahead: a process opening the store with it sees every lease a
    killed process left as expired (as it would be once ``lease_seconds`` had passed)."""
    return lambda: time.time() + 3600


def waiting_model(release: anyio.Event) -> FunctionModel:
    """A model whose every request waits until ``release`` is set, then answers ``done``."""

    async def answer(request: ModelRequest) -> ModelResponse:
        await release.wait()
        return ModelResponse(text="done")

    return FunctionModel(answer)


def echo_tool(name: str, *, origin: str = "builtin", mutating: bool = False) -> Tool:
    """A tool whose result names itself and its arguments."""

    async def handler(arguments: Mapping[str, Any], context: ToolContext) -> str:
        return f"{name} ran with {dict(arguments)} in {context.cwd}"

    return Tool(
        name=name,
        description=f"The {name} tool.",
        input_schema={"type": "object", "additionalProperties": True},
        handler=handler,
        origin=origin,
        mutating=mutating,
    )


@dataclass
class Project:
    """A temporary project: agent files, settings, a registry and runtimes over them."""

    root: Path
    home: Path
    registry: ToolRegistry
    settings: Settings = field(default_factory=Settings)

    def agent(self, name: str, body: str = "Do the task.", **frontmatter: object) -> Path:
        return agent_file(self.root, name, body, **frontmatter)

    def catalog(self) -> Catalog:
        return Catalog(project=self.root, home=self.home, settings=self.settings)

    def runtime(
        self,
        provider: Provider | ScriptedModel,
        *,
        store: Store | None = None,
        **options: Any,
    ) -> SubagentRuntime:
        if not hasattr(provider, "capabilities"):
            provider = InProcessProvider(provider)  # type: ignore[arg-type]
        return SubagentRuntime(
            catalog=self.catalog(),
            registry=self.registry,
            provider=provider,  # type: ignore[arg-type]
            store=store,
            options=RuntimeOptions(**{"settings": self.settings, "project": self.root, **options}),
        )


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Project:
    root = tmp_path / "project"
    root.mkdir()
    registry = ToolRegistry()
    for name in ("Read", "Glob", "Grep"):
        registry.register(echo_tool(name))
    registry.register(echo_tool("Write", mutating=True))
    return Project(root=root, home=isolated_home, registry=registry)


def git(cwd: Path, *args: str) -> str:
    """``git -C cwd ARGS``; its standard output, stripped (a failure raises)."""
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(project: Project) -> Project:
    """The project as a real git repository with one commit (``README.md``) and an identity."""
    git(project.root, "init", "-q", "-b", "main")
    git(project.root, "config", "user.email", "dev@example.com")
    git(project.root, "config", "user.name", "Dev")
    (project.root / "README.md").write_text("hello\n")
    git(project.root, "add", "README.md")
    git(project.root, "commit", "-q", "-m", "initial")
    return project


def call_turn(name: str, **arguments: object) -> dict[str, object]:
    """A scripted model turn that calls the tool ``name`` with ``arguments``."""
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def tool_results(model: ScriptedModel | FunctionModel, agent: str) -> list[Message]:
    """Every tool result the agent's runs were shown, in order, without repeats."""
    seen: dict[str | None, Message] = {}
    for request in model.requests:
        if request.agent == agent:
            for message in request.messages:
                if message.role == "tool":
                    seen.setdefault(message.tool_call_id, message)
    return list(seen.values())
