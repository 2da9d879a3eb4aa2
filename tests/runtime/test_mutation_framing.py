"""Mutation framing tells the truth: what a child is told about changing files, the sandbox's
writable set and ``explain`` come from one decision (``EffectiveAuthority.writes``).

Real built-in tools and the real OS sandbox on a temporary project; the model is the only
double. Each direction is checked on the prompt the model received, the ``published`` event
and the file system after a real ``Bash`` command.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from membrane.builtin_tools import register_builtin_tools
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.resolve import CallParams, Deployment, ParentContext, resolve
from membrane.runtime import SubagentStartRequest
from membrane.testing import FunctionModel
from membrane.tools.registry import ToolRegistry

from .conftest import Project, echo_tool

pytestmark = pytest.mark.anyio


@pytest.fixture
def real(project: Project) -> Project:
    registry = ToolRegistry()
    register_builtin_tools(registry)
    project.registry = registry
    return project


async def _start(project: Project, agent: str) -> tuple[str, dict[str, Any]]:
    """Run ``agent`` once with a model that runs ``touch made.txt``; the system prompt it was
    given and its ``published`` event."""
    systems: list[str] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        systems.append(request.system)
        if any(m.role == "tool" for m in request.messages):
            return ModelResponse(text="done")
        call = ToolCall("b-1", "Bash", {"command": "touch made.txt"})
        return ModelResponse(tool_calls=(call,))

    async with project.runtime(FunctionModel(answer)) as runtime:
        with anyio.fail_after(60):
            result = await runtime.run(SubagentStartRequest(agent, "make a file"))
        events = runtime.store.events(session_id=result.run_id)
    published = next(e.data for e in events if e.kind == "published")
    return systems[0], published


def _explained(project: Project, agent: str) -> bool:
    registry = project.registry
    definition = project.catalog().dispatch(agent, child=False).definition
    deployment = Deployment(settings=project.settings, registry_tools=registry.tools())
    parent = ParentContext(tools=registry.tools())
    return resolve(definition, CallParams(), parent, deployment, depth=0).writes


async def test_a_read_bash_child_is_told_its_folder_is_read_only_and_it_is(real: Project) -> None:
    real.agent("runner", tools="[Read, Bash]")
    system, published = await _start(real, "runner")
    assert "You can change files" not in system
    assert "You cannot change files: Bash runs commands, but your working folder is read-only" in (
        system
    )
    assert published["sandbox"]["writable"] == []
    assert _explained(real, "runner") is False
    assert not (real.root / "made.txt").exists()


async def test_a_writing_bash_child_is_told_it_can_change_files_and_it_can(real: Project) -> None:
    real.agent("builder", tools="[Read, Bash, Write]")
    system, published = await _start(real, "builder")
    assert "You can change files and state with Bash, Write." in system
    assert "read-only" not in system
    assert published["sandbox"]["writable"] == [str(real.root.resolve())]
    assert _explained(real, "builder") is True
    assert (real.root / "made.txt").exists()


async def test_a_read_bash_child_with_a_state_changing_host_tool_is_told_both(
    real: Project,
) -> None:
    real.registry.register(echo_tool("deploy", origin="host", mutating=True))
    real.agent("operator", tools="[Read, Bash, deploy]")
    system, published = await _start(real, "operator")
    assert "You can change state with deploy" in system
    assert "read-only to them" in system
    assert published["sandbox"]["writable"] == []
    assert not (real.root / "made.txt").exists()
