"""What each ``SKILL.md`` parsed to, by content digest, kept in the project's state folder.

Discovering the skills reads every ``SKILL.md`` on the skill roots (Membrane ships one) and
parses its YAML frontmatter with ruamel, whose pure-Python parser and import cost far more than
reading and hashing the file. A process that starts cold reads each file, hashes it, and takes
what it parsed to (the name and description, or why it was skipped, and every warning) from
this cache while the file at that path still has that digest: only a changed file is parsed.

The cache is one JSON file (``skills.json`` beside the definition cache). It names the Membrane
version and the size and time of the parser's own modules, so a parser that changed never
serves an old answer. A missing, unreadable, malformed or foreign cache is ignored (and
rewritten); one that cannot be written is skipped silently: it is only ever a shortcut.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from membrane.agents.cache import parser_fingerprint, read_entries, write_entries
from membrane.agents.definition import DefinitionWarning

__all__ = ["SKILLS_CACHE_FILE", "ParsedSkill", "SkillCache"]

#: The cache's file name inside the state folder.
SKILLS_CACHE_FILE: Final = "skills.json"
_FORMAT: Final = 1
_PARSER_MODULES: Final = (
    "skills",
    "skill_cache",
    "frontmatter",
    "repair",
    "values",
)


@dataclass(frozen=True, slots=True)
class ParsedSkill:
    """What one ``SKILL.md``'s text parsed to: the skill's ``name`` and ``description`` (both
    ``None`` when it was skipped) and the warnings parsing it gave."""

    name: str | None
    description: str | None
    problems: tuple[DefinitionWarning, ...]

    def to_json(self) -> list[object]:
        return [
            self.name,
            self.description,
            [[p.path, p.line, p.code, p.message] for p in self.problems],
        ]

    @classmethod
    def from_json(cls, data: object) -> ParsedSkill | None:
        """The entry ``to_json`` wrote, or ``None`` when ``data`` is not one."""
        if not (isinstance(data, list) and len(data) == 3 and isinstance(data[2], list)):
            return None
        name, description, problems = data
        if not all(isinstance(v, str | None) for v in (name, description)):
            return None
        warnings: list[DefinitionWarning] = []
        for item in problems:
            if not (
                isinstance(item, list)
                and len(item) == 4
                and isinstance(item[0], str)
                and (item[1] is None or type(item[1]) is int)
                and isinstance(item[2], str)
                and isinstance(item[3], str)
            ):
                return None
            warnings.append(DefinitionWarning(item[0], item[1], item[2], item[3]))
        return cls(name, description, tuple(warnings))


class SkillCache:
    """The cache file at ``path`` (``None``: no cache, every lookup misses)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        #: SKILL.md path -> [digest (hex), the parsed skill as JSON]
        self._entries: dict[str, list[object]] | None = None
        self._fingerprint = ""
        self._dirty = False
        self._seen: set[str] = set()
        #: Files answered from the cache, and files parsed.
        self.hits = 0
        self.misses = 0

    def _load(self) -> dict[str, list[object]]:
        if self._entries is not None:
            return self._entries
        self._fingerprint = parser_fingerprint(_PARSER_MODULES, fmt=_FORMAT)
        entries: dict[str, list[object]] = read_entries(self.path, self._fingerprint)
        self._entries = entries
        return entries

    def get(self, path: str, digest: str) -> ParsedSkill | None:
        """What ``path`` parsed to when its content had ``digest``, if kept."""
        self._seen.add(path)
        if self.path is None:
            return None
        entry = self._load().get(path)
        found = None
        if isinstance(entry, list) and len(entry) == 2 and entry[0] == digest:
            found = ParsedSkill.from_json(entry[1])
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def put(self, path: str, digest: str, parsed: ParsedSkill) -> None:
        """Keep what ``path`` parsed to, when JSON carries it exactly."""
        if self.path is None:
            return
        encoded = parsed.to_json()
        try:
            exact = ParsedSkill.from_json(json.loads(json.dumps(encoded))) == parsed
        except ValueError:
            exact = False
        if exact:
            self._load()[path] = [digest, encoded]
            self._dirty = True

    def save(self) -> None:
        """Forget the files not looked up since this cache was opened, and write the cache if it
        changed (atomically, private to its owner); never raises."""
        if self.path is None or self._entries is None:
            return
        gone = self._entries.keys() - self._seen
        for path in gone:
            del self._entries[path]
        if not (self._dirty or gone):
            return  # unchanged: nothing is written
        if write_entries(self.path, self._fingerprint, self._entries):
            self._dirty = False
