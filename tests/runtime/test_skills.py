"""Skills through the runtime: a child's ``Skill`` loads only its selected skills, an inheriting
child gets its parent's ``# Skills`` catalog exactly, ``isolated: true`` gets none."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from membrane.agents.skills import discover_skills
from membrane.builtin_tools.skill import skill_tool
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.resolve import Deployment
from membrane.runtime import SubagentStartRequest
from membrane.testing import FunctionModel

from .conftest import Project

pytestmark = pytest.mark.anyio


def write_skill(root: Path, name: str, body: str) -> None:
    folder = root / name
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Use {name}.\n---\n{body}\n", encoding="utf-8"
    )
    (folder / "references" / "notes.md").write_text(f"{name} notes", encoding="utf-8")


def skills_section(system: str) -> str:
    """The ``# Skills`` section of a system prompt (sections are separated by blank lines)."""
    return next((part for part in system.split("\n\n") if part.startswith("# Skills")), "")


@pytest.fixture
def skilled(project: Project) -> Deployment:
    root = project.root / ".membrane" / "skills"
    for name in ("pdf", "charts", "lint"):
        write_skill(root, name, f"The {name} instructions.")
    catalog = discover_skills([root])
    project.registry.register(skill_tool(catalog.skills))
    return Deployment(skills=catalog.descriptions(), skill_files=catalog.skills)


async def test_an_inheriting_child_gets_its_parents_skills_catalog_exactly(
    project: Project, skilled: Deployment
) -> None:
    project.agent("lead", tools="inherit", skills="[pdf, charts]", allowed_subagents="[heir]")
    project.agent("heir", tools="inherit", allowed_subagents="[grandheir]")
    project.agent("grandheir", tools="inherit")
    systems: dict[str, str] = {}
    results: dict[str, list[str]] = {}

    async def answer(request: ModelRequest) -> ModelResponse:
        systems.setdefault(request.agent, request.system)
        done = [m for m in request.messages if m.role == "tool"]
        results[request.agent] = [m.content for m in done]
        nxt = {"lead": "heir", "heir": "grandheir"}.get(request.agent)
        if nxt and not done:
            return ModelResponse(tool_calls=(ToolCall("t", "Task", {"agent": nxt, "task": "go"}),))
        if request.agent == "grandheir" and not done:
            calls = (
                ToolCall("a", "Skill", {"skill": "charts"}),
                ToolCall("b", "Skill", {"skill": "lint"}),
            )
            return ModelResponse(tool_calls=calls)
        return ModelResponse(text="done")

    async with project.runtime(FunctionModel(answer), deployment=skilled) as runtime:
        with anyio.fail_after(20):
            result = await runtime.run(SubagentStartRequest("lead", "go"))
    assert result.status == "completed"
    lead = skills_section(systems["lead"])
    assert "- pdf: Use pdf." in lead and "- charts: Use charts." in lead and "lint" not in lead
    assert skills_section(systems["heir"]) == lead
    assert skills_section(systems["grandheir"]) == lead
    loaded, refused = results["grandheir"]
    assert "The charts instructions." in loaded and "references/notes.md" in loaded
    assert "unknown-skill" in refused and "lint" in refused
    assert "available: charts, pdf" in refused


async def test_a_child_loads_only_the_skills_it_selects_and_their_files(
    project: Project, skilled: Deployment
) -> None:
    project.agent("lead", tools="inherit", allowed_subagents="[picky, sealed]")
    project.agent("picky", tools="inherit", skills="[lint]")
    project.agent("sealed", tools="inherit", isolated=True)
    systems: dict[str, str] = {}
    results: dict[str, list[str]] = {}
    offered: dict[str, set[str]] = {}

    async def answer(request: ModelRequest) -> ModelResponse:
        systems.setdefault(request.agent, request.system)
        offered.setdefault(request.agent, {t["name"] for t in request.tools})
        done = [m for m in request.messages if m.role == "tool"]
        results[request.agent] = [m.content for m in done]
        if request.agent == "lead" and not done:
            calls = (
                ToolCall("p", "Task", {"agent": "picky", "task": "go"}),
                ToolCall("s", "Task", {"agent": "sealed", "task": "go"}),
            )
            return ModelResponse(tool_calls=calls)
        if request.agent == "picky" and not done:
            calls = (
                ToolCall("a", "Skill", {"skill": "lint", "file": "references/notes.md"}),
                ToolCall("b", "Skill", {"skill": "lint", "file": "../pdf/SKILL.md"}),
                ToolCall("c", "Skill", {"skill": "pdf"}),
            )
            return ModelResponse(tool_calls=calls)
        if request.agent == "sealed" and not done:
            return ModelResponse(tool_calls=(ToolCall("a", "Skill", {"skill": "pdf"}),))
        return ModelResponse(text="done")

    async with project.runtime(FunctionModel(answer), deployment=skilled) as runtime:
        with anyio.fail_after(20):
            await runtime.run(SubagentStartRequest("lead", "go"))
    picky = skills_section(systems["picky"])
    assert "- lint: Use lint." in picky and "pdf" not in picky
    notes, escaped, other = results["picky"]
    assert notes == "lint notes"
    assert "is not a file of skill 'lint'" in escaped
    assert "unknown-skill" in other and "available: lint" in other
    # isolated: no skills and no Skill, whatever it inherits; a call to it is vetoed.
    assert skills_section(systems["sealed"]) == ""
    assert "Skill" not in offered["sealed"] and "Skill" in offered["picky"]
    assert "tool-not-visible" in results["sealed"][0]
