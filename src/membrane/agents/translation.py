"""The values a dialect translation works with: the dialect, its entries and the collector.

A dialect turns the parsed frontmatter into *entries*: the key as written, the Membrane field it
sets and the value in Membrane's terms. The field rules of ``membrane.agents.fields`` then
validate each value exactly as for a Membrane file, so a dialect can rename and translate but
never bypass a check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from membrane.agents.definition import DefinitionWarning
from membrane.agents.dialect import DIALECT_NAMES, MEMBRANE, OMITTED_SETTING, Dialect
from membrane.agents.values import ValueReader, split_commas
from membrane.config.values import OmittedTools

__all__ = [
    "DIALECT_NAMES",
    "MEMBRANE",
    "OMITTED_SETTING",
    "Dialect",
    "Entry",
    "OmittedTools",
    "Translation",
    "tokens_of",
]


@dataclass(frozen=True, slots=True)
class Entry:
    """One value to validate: ``key`` as written (for messages and lines), the Membrane
    ``field`` it sets (``None``: not a field, kept in ``extra``), and the value."""

    key: str
    field: str | None
    value: Any
    #: True when the dialect already warned about this key (no ``unknown-key`` on top).
    quiet: bool = False


@dataclass
class Translation:
    """What a dialect's translator collects for one file."""

    reader: ValueReader
    entries: list[Entry] = field(default_factory=list)
    #: Selectors the dialect adds to whatever ``tools`` ends up as (``mcpServers``).
    extra_tools: list[str] = field(default_factory=list)
    #: Values a dialect reads together once every key is seen (OpenCode's ``tools`` and
    #: ``permission``).
    pending: dict[str, Any] = field(default_factory=dict)

    def add(self, key: str, name: str | None, value: Any, *, quiet: bool = False) -> None:
        self.entries.append(Entry(key, name, value, quiet))

    def warn_file(self, code: str, message: str) -> None:
        """A warning about the file as a whole, at its first field's line."""
        line = min(self.reader.lines.values(), default=1)
        self.reader.warnings.append(DefinitionWarning(self.reader.path, line, code, message))

    def ignore(self, key: str, value: Any, why: str) -> None:
        """A key the product knows and Membrane cannot honour: kept in ``extra``, warned."""
        self.reader.warn(key, "dialect-unsupported", f"`{key}` {why} (kept in `extra`, ignored)")
        self.add(key, None, value, quiet=True)


def tokens_of(value: Any) -> list[str] | None:
    """A comma string or a list of strings as tokens; ``None`` for any other shape."""
    if isinstance(value, str):
        return [t for t in split_commas(value) if t]
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return [t.strip() for t in value]
    return None
