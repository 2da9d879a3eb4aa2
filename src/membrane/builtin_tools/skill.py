"""``Skill``: load a selected skill's instructions, or one of its files, on demand.

The tool is bound to one set of skills: the runtime gives each child a ``Skill`` of its own,
bound to the skills its definition selects (or, for ``tools: inherit``, to its parent's), so a
child can load exactly the skills its ``# Skills`` section lists and no other. A name outside
that set is refused without naming any skill the child was not given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from membrane.agents.skills import Skill
from membrane.errors import UnknownSkill
from membrane.tools.spec import Tool, ToolContext

__all__ = ["SKILL_TOOL", "bind_skill_tool", "skill_tool"]

SKILL_TOOL: Final = "Skill"

DESCRIPTION = """\
Load a skill: its instructions (and the list of its files), or one of its files.

- `skill`: the name of a skill listed under `# Skills` in your instructions.
- `file` (optional): a path relative to the skill's folder, one of the files the skill lists \
(under `references/`, `scripts/` or `assets/`). Leave it out to get the instructions.
Use a skill when the task matches its description; follow its instructions."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "skill": {"type": "string", "minLength": 1, "description": "The skill's name."},
        "file": {
            "type": "string",
            "minLength": 1,
            "description": "A file of the skill, relative to its folder.",
        },
    },
    "required": ["skill"],
    "additionalProperties": False,
}


def skill_tool(skills: Mapping[str, Skill]) -> Tool:
    """A ``Skill`` tool that can load exactly ``skills`` (name -> skill)."""
    chosen = dict(skills)

    async def handler(arguments: Mapping[str, Any], context: ToolContext) -> str:
        name = arguments["skill"]
        skill = chosen.get(name)
        if skill is None:
            listed = ", ".join(sorted(chosen)) or "none"
            raise UnknownSkill(
                f"no skill named {name!r} is available to this agent (available: {listed})",
                skill=name,
            )
        # Reading a skill is imported on the first call: declaring Skill needs none of it.
        from membrane.builtin_tools.skill_files import load_skill

        return await load_skill(skill, arguments.get("file"))

    return Tool(SKILL_TOOL, DESCRIPTION, SCHEMA, handler)


def bind_skill_tool(
    local_tools: list[Tool], selected: Mapping[str, str] | None, files: Mapping[str, Skill]
) -> list[Tool]:
    """A child's scope-local tools with its own ``Skill``: bound to the skills it was given
    (``selected``, from its effective authority), replacing a ``Skill`` it inherited. Nothing
    changes when ``Skill`` is not callable or the deployment has no discovered skills."""
    if selected is None or not files:
        return local_tools
    own = skill_tool({name: files[name] for name in selected if name in files})
    return [tool for tool in local_tools if tool.name != SKILL_TOOL] + [own]
