"""The packaged builtin definitions, read once per process.

A catalog with a definition cache takes them from it (a cold start whose files are all cached
needs no YAML parser: ``decode_definition`` imports it only when a file has to be parsed) and
keeps them in it for the next process.
"""

from __future__ import annotations

from pathlib import Path

from membrane.agents.cache import DefinitionCache
from membrane.agents.definition import AgentDefinition
from membrane.agents.dialect import MEMBRANE, Dialect
from membrane.agents.files import content_digest

__all__ = ["BUILTIN_DIR", "builtin_definitions", "builtin_entries", "decode_definition"]

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "builtin_agents"


def builtin_definitions() -> tuple[AgentDefinition, ...]:
    """The packaged builtins, read once per process."""
    return tuple(definition for _, _, definition in builtin_entries(DefinitionCache(None)))


#: The packaged builtins as read: (path, digest of the file, definition).
_BUILTINS: list[tuple[str, bytes, AgentDefinition]] = []


def builtin_entries(cache: DefinitionCache) -> list[tuple[str, bytes, AgentDefinition]]:
    """The packaged builtins as ``(path, digest, definition)``: read once per process, from
    ``cache`` when it has them, and kept in it for the next process."""
    if not _BUILTINS:
        for file in sorted(BUILTIN_DIR.glob("*.md")):
            data, path = file.read_bytes(), f"<builtin>/{file.name}"
            digest = content_digest(data)
            found = cache.get(path, root="builtin", digest=digest)
            if found is None:
                found = decode_definition(data, path=path, root="builtin")
            _BUILTINS.append((path, digest, found))
    for path, digest, definition in _BUILTINS:
        if not cache.holds(path, root="builtin", digest=digest):
            cache.put(path, root="builtin", digest=digest, definition=definition)
    return _BUILTINS


def decode_definition(
    data: bytes, *, path: str, root: str, dialect: Dialect = MEMBRANE
) -> AgentDefinition:
    """``membrane.agents.frontmatter.decode_definition``, with the YAML parser imported only
    when a file has to be parsed (a cold start whose files are all cached never needs it)."""
    if dialect.name == "codex":  # a Codex custom agent is a TOML file
        from membrane.agents.codex_file import decode_codex

        return decode_codex(data, path=path, root=root, dialect=dialect)
    from membrane.agents.frontmatter import decode_definition as decode

    return decode(data, path=path, root=root, dialect=dialect)
