"""Small leaks a hostile model found: a hidden name in an error, a false note in the prompt."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from membrane.config.values import RoleSpec, Settings
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.tools.registry import ToolRegistry

from .support import Ran, runtime_for, spy_tool

pytestmark = pytest.mark.anyio


async def test_a_role_filter_naming_a_removed_tool_reveals_it_to_no_model(project: Path) -> None:
    (project / ".membrane" / "agents" / "lead.md").write_text(
        "---\nname: lead\ndescription: Leads.\ntools: Read\nallowed_subagents: [scout]\n---\nx\n"
    )
    ran: Ran = []
    registry = ToolRegistry()
    registry.register(spy_tool("SecretDeploy", ran))
    settings = Settings(roles={"agent": RoleSpec(deny=("SecretDeploy",))})
    seen: list[str] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        tool_results = [m for m in request.messages if m.role == "tool"]
        if request.agent == "scout":
            return ModelResponse(text="scouted")
        if not tool_results:
            registry.remove("SecretDeploy")  # the host drops it while the lead is running
            start = ToolCall("t1", "Task", {"agent": "scout", "task": "look"})
            return ModelResponse(tool_calls=(start,), stop_reason="tool_calls")
        seen.extend(m.content for m in tool_results)
        seen.append(request.system)
        seen.extend(json.dumps(tool) for tool in request.tools)
        return ModelResponse(text="done")

    runtime = runtime_for(project, answer, settings=settings, registry=registry)
    with anyio.fail_after(60):
        async with runtime:
            result = await runtime.run(SubagentStartRequest("lead", "go", role="agent"))
    assert result.status == "completed"
    failure = json.loads(seen[0])["error"]
    assert failure["code"] == "setup-failed"
    assert "deployment configuration" in failure["message"]
    assert all("SecretDeploy" not in text and "Secret" not in text for text in seen)
    assert ran == []


def _keeper(project: Path, tools: str) -> Path:
    (project / ".membrane" / "agents" / "keeper.md").write_text(
        f"---\nname: keeper\ndescription: Keeps notes.\ntools: {tools}\nmemory: project\n---\nx\n"
    )
    memory = project / ".membrane" / "memory" / "keeper" / "MEMORY.md"
    memory.parent.mkdir(parents=True)
    memory.write_text("remember this\n")
    return memory


async def _run_keeper(project: Path, backend: str, commands: list[str]) -> tuple[str, list[str]]:
    systems: list[str] = []
    results: list[str] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        systems.append(request.system)
        done = [m for m in request.messages if m.role == "tool"]
        if not done:
            calls = [ToolCall(f"b{i}", "Bash", {"command": c}) for i, c in enumerate(commands)]
            return ModelResponse(tool_calls=tuple(calls), stop_reason="tool_calls")
        results.extend(m.content for m in done)
        return ModelResponse(text="done")

    runtime = runtime_for(project, answer, settings=Settings(sandbox=backend))  # type: ignore[arg-type]
    with anyio.fail_after(60):
        async with runtime:
            result = await runtime.run(SubagentStartRequest("keeper", "note it"))
    assert result.status == "completed"
    return systems[0], results


async def test_a_child_told_its_memory_is_read_only_cannot_change_it_with_bash(
    any_sandbox: str, project: Path
) -> None:
    memory = _keeper(project, "Read, Bash")
    relative = memory.relative_to(project)
    commands = [f"echo changed >> {relative}", f"rm {relative}"]
    if any_sandbox != "guard":  # what a program does is for the kernel to refuse
        commands.append(f"python3 -c \"open('{relative}', 'a').write('changed')\"")
    system, _ = await _run_keeper(project, any_sandbox, commands)
    assert "You can read it but not change it." in system
    assert memory.read_text() == "remember this\n"


async def test_a_child_told_to_keep_its_memory_current_can(any_sandbox: str, project: Path) -> None:
    memory = _keeper(project, "Read, Write, Bash")
    system, results = await _run_keeper(
        project, any_sandbox, [f"echo learned >> {memory.relative_to(project)}"]
    )
    assert "Keep it current" in system
    assert json.loads(results[0])["exit_code"] == 0
    assert memory.read_text() == "remember this\nlearned\n"
