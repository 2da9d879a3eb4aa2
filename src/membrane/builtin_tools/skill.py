"""``Skill``: load a selected skill's instructions, or one of its files, on demand.

The tool is bound to one set of skills: the runtime gives each child a ``Skill`` of its own,
bound to the skills its definition selects (or, for ``tools: inherit``, to its parent's), so a
child can load exactly the skills its ``# Skills`` section lists and no other. A name outside
that set is refused without naming any skill the child was not given.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Final

from membrane.agents.skills import Skill
from membrane.builtin_tools._support import in_thread, looks_binary
from membrane.errors import ToolFailed, UnknownSkill
from membrane.tools.spec import Tool, ToolContext

__all__ = ["MAX_SKILL_FILE_BYTES", "SKILL_TOOL", "bind_skill_tool", "skill_tool"]

SKILL_TOOL: Final = "Skill"
#: A skill file larger than this is refused (read it with Read, in windows, if it is needed).
MAX_SKILL_FILE_BYTES: Final = 256 * 1024

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
        file = arguments.get("file")
        if file is None:
            return await in_thread(_instructions, skill)
        return await in_thread(_file_text, skill, file)

    return Tool(SKILL_TOOL, DESCRIPTION, SCHEMA, handler)


def _instructions(skill: Skill) -> str:
    try:
        body = skill.body()
    except Exception as exc:
        raise ToolFailed(
            f"skill {skill.name!r} cannot be read now: {exc}", tool=SKILL_TOOL
        ) from exc
    files = skill.files()
    listing = "\n".join(f"- {f}" for f in files) if files else "(none)"
    return (
        f"# Skill: {skill.name}\nFolder: {skill.folder}\n\n{body.rstrip()}\n\n"
        f"## Files of this skill (load one with file=PATH)\n{listing}"
    )


def _file_text(skill: Skill, file: str) -> str:
    relative = PurePosixPath(file)
    if relative.is_absolute() or ".." in relative.parts or file not in skill.files():
        raise ToolFailed(
            f"{file!r} is not a file of skill {skill.name!r}; load the skill without `file` to "
            "see its files",
            tool=SKILL_TOOL,
        )
    path = skill.folder / Path(*relative.parts)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ToolFailed(f"{file!r} is not a regular file", tool=SKILL_TOOL)
        if info.st_size > MAX_SKILL_FILE_BYTES:
            raise ToolFailed(
                f"{file!r} is {info.st_size} bytes, more than {MAX_SKILL_FILE_BYTES}; read it "
                f"with Read from {path}",
                tool=SKILL_TOOL,
            )
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_SKILL_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if looks_binary(data[:8192]):
        return f"{file} is a binary file ({len(data)} bytes) at {path}"
    return data.decode("utf-8", errors="replace")


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
