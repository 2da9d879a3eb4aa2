"""What ``Skill`` does when called (imported on its first call): a skill's instructions with
the list of its files, or one of those files."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import Final

from membrane.agents.skills import Skill
from membrane.builtin_tools._support import in_thread, looks_binary
from membrane.errors import ToolFailed

__all__ = ["MAX_SKILL_FILE_BYTES", "load_skill"]

SKILL_TOOL: Final = "Skill"
#: A skill file larger than this is refused (read it with Read, in windows, if it is needed).
MAX_SKILL_FILE_BYTES: Final = 256 * 1024


async def load_skill(skill: Skill, file: str | None) -> str:
    """``skill``'s instructions (``file`` is ``None``) or the text of one of its files."""
    if file is None:
        return await in_thread(_instructions, skill)
    return await in_thread(_file_text, skill, file)


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
