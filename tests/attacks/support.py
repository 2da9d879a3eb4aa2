"""What the attack tests share: a hostile model, a runtime over the real built-in tools, and
ways to look at the world afterwards."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from membrane.agents.catalog import Catalog
from membrane.builtin_tools import builtin_tools
from membrane.config.values import Settings
from membrane.models.base import Message, ModelRequest, ModelResponse
from membrane.runtime import (
    InProcessProvider,
    RuntimeOptions,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.sandbox import SandboxPolicy
from membrane.testing import FunctionModel
from membrane.tools.registry import ToolRegistry
from membrane.tools.spec import Tool, ToolContext

__all__ = [
    "Ran",
    "codes",
    "drive",
    "hostile",
    "running_as",
    "runtime_for",
    "snapshot",
    "spy_tool",
]

#: Names of the spy tools whose handlers ran, in order.
Ran = list[str]


def snapshot(*folders: Path) -> dict[str, str]:
    seen: dict[str, str] = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink():
                seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                seen[str(path)] = "other"
    return seen


def running_as(token: str) -> bool:
    """Whether a live process (not a zombie) on this machine has ``token`` as its ``argv[0]``
    (found by name: inside a PID namespace a process's own pid means nothing here)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if cmdline.startswith(token.encode()) and state != "Z":
            return True
    return False


def spy_tool(name: str, ran: Ran, *, origin: str = "host") -> Tool:
    """A host tool that records that its handler ran."""

    async def handler(arguments: Mapping[str, Any], context: ToolContext) -> str:
        ran.append(name)
        return f"{name} ran"

    return Tool(name, f"The {name} tool.", {"type": "object"}, handler, origin=origin)


def hostile(calls: Sequence[Any]) -> tuple[FunctionModel, list[Message]]:
    """A model that sends ``calls`` in its first reply, then answers; it keeps the results."""
    results: list[Message] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        answered = [m for m in request.messages if m.role == "tool"]
        if not answered:
            return ModelResponse(tool_calls=tuple(calls), stop_reason="tool_calls")
        results.extend(answered)
        return ModelResponse(text="done")

    return FunctionModel(answer), results


def runtime_for(
    project: Path,
    model: FunctionModel | Callable[[ModelRequest], Awaitable[ModelResponse]],
    *,
    settings: Settings | None = None,
    registry: ToolRegistry | None = None,
) -> SubagentRuntime:
    """A runtime over ``project`` with the real built-in tools (under the settings' sandbox)."""
    settings = settings if settings is not None else Settings()
    if registry is None:
        registry = ToolRegistry()
    for tool in builtin_tools(sandbox=SandboxPolicy.from_settings(settings)):
        if tool.name not in registry:
            registry.register(tool)
    if not isinstance(model, FunctionModel):
        model = FunctionModel(model)
    return SubagentRuntime(
        catalog=Catalog(project=project, home=project.parent / "home", settings=settings),
        registry=registry,
        provider=InProcessProvider(model),
        options=RuntimeOptions(settings=settings, project=project),
    )


async def drive(
    project: Path, agent: str, calls: Sequence[Any], *, settings: Settings | None = None
) -> tuple[list[Message], list[str]]:
    """Run ``agent`` once under a model sending ``calls``; the tool results and the statuses of
    every run afterwards. The run must complete: nothing a model sends ends it otherwise."""
    model, results = hostile(calls)
    runtime = runtime_for(project, model, settings=settings)
    with anyio.fail_after(60):
        async with runtime:
            result = await runtime.run(SubagentStartRequest(agent, "attack"))
            statuses = [run.status for run in runtime.runs()]
    assert result.status == "completed", result
    return results, statuses


def codes(results: list[Message]) -> list[str | None]:
    out: list[str | None] = []
    for message in results:
        try:
            out.append(json.loads(message.content)["error"]["code"] if message.is_error else None)
        except (ValueError, KeyError, TypeError):
            out.append(None)
    return out
