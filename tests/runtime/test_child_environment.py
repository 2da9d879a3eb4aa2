"""What a child's own processes find in their environment: the ``membrane`` command and the full
skill root list, through the real runtime and the real ``Bash`` tool."""

from __future__ import annotations

import json
import os

import anyio
import pytest

from membrane.builtin_tools.bash import bash_tool
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.resolve import Deployment
from membrane.runtime import SubagentStartRequest
from membrane.testing import FunctionModel

from .conftest import Project

pytestmark = pytest.mark.anyio

PRINT_ENV = (
    'printf \'{"cli": "%s", "skills": "%s"}\' "$MEMBRANE_CLI_PATH" "$MEMBRANE_AGENT_SKILLS_DIRS"'
)


async def test_a_childs_bash_finds_membrane_and_the_skill_roots(project: Project) -> None:
    project.registry.register(bash_tool())
    project.agent("shell", tools="[Read, Bash]")
    seen: list[str] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        results = [m for m in request.messages if m.role == "tool"]
        if not results:
            return ModelResponse(tool_calls=(ToolCall("b", "Bash", {"command": PRINT_ENV}),))
        seen.append(results[0].content)
        return ModelResponse(text="done")

    roots = (str(project.root / ".membrane" / "skills"), str(project.home / "skills"))
    deploy = Deployment(skill_roots=roots)
    async with project.runtime(FunctionModel(answer), deployment=deploy) as runtime:
        with anyio.fail_after(30):
            result = await runtime.run(SubagentStartRequest("shell", "go"))
    assert result.status == "completed", result.error
    stdout = json.loads(seen[0])["stdout"]
    found = json.loads(stdout)
    assert found["skills"] == os.pathsep.join(roots)
    assert found["cli"] and (found["cli"].endswith("membrane") or "-m membrane" in found["cli"])
