"""Parsing one ``SKILL.md`` (imported only when a file is not in the skills cache,
:mod:`membrane.agents.skill_cache`): its frontmatter's name and description, or why the skill
is skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from membrane.agents.definition import NAME_RE, DefinitionWarning
from membrane.agents.frontmatter import load_yaml, split_frontmatter
from membrane.agents.skill_cache import ParsedSkill
from membrane.errors import DefinitionError

__all__ = ["parse_skill"]

_KNOWN_KEYS: Final = frozenset(
    {"name", "description", "license", "allowed-tools", "metadata", "version", "compatibility"}
)


def parse_skill(data: bytes, folder: Path, path: str) -> ParsedSkill:
    """What ``SKILL.md``'s ``data`` says: its name and description, or why it is skipped."""
    try:
        fm = split_frontmatter(data.decode("utf-8"), path=path)
        mapping, fm = load_yaml(fm, known_keys=_KNOWN_KEYS)
    except UnicodeDecodeError:
        return _skipped(DefinitionWarning(path, None, "skill-invalid", "SKILL.md is not UTF-8"))
    except DefinitionError as exc:
        line = exc.data.get("line")
        return _skipped(
            DefinitionWarning(path, line if isinstance(line, int) else None, exc.code, exc.message)
        )
    problems = list(fm.warnings)
    name = mapping.get("name", folder.name)
    description = mapping.get("description")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        return _skipped(
            *problems,
            DefinitionWarning(
                path, 1, "skill-invalid", f"name {name!r} is not a valid skill name; skipped"
            ),
        )
    if not isinstance(description, str) or not description.strip():
        return _skipped(
            *problems,
            DefinitionWarning(
                path,
                1,
                "skill-invalid",
                "a skill needs a `description` (when to use it); skipped",
            ),
        )
    if name != folder.name:
        problems.append(
            DefinitionWarning(
                path,
                1,
                "skill-name-differs",
                f"name {name!r} differs from its folder {folder.name!r}; the name is used",
            )
        )
    return ParsedSkill(name, " ".join(description.split()), tuple(problems))


def _skipped(*problems: DefinitionWarning) -> ParsedSkill:
    return ParsedSkill(None, None, problems)
