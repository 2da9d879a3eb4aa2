"""Parsed definitions by content digest, kept in the project's state folder across processes.

Parsing a definition (ruamel's pure-Python YAML) costs about a millisecond; reading and hashing
the file costs a few microseconds. A process that starts cold reads the file, hashes it, and
takes the definition from this cache when the file at that path, under that root, still has
that digest: only a changed file is parsed again.

The cache is one JSON file (never pickle: nothing read back can run code). An entry is
written only when decoding its JSON gives back exactly the definition that was parsed, so a
value JSON cannot carry (a date in an unknown key) just keeps its file uncached. The file
names the Membrane version and the size and time of the parser's own modules, so a parser
that changed never serves an old answer. A missing, unreadable, malformed or foreign cache
is ignored (and rewritten); a cache that cannot be written is skipped silently: it is only
ever a shortcut.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import fields
from pathlib import Path
from typing import Any, Final

from membrane._version import __version__
from membrane.agents.definition import AgentDefinition, DefinitionWarning

__all__ = ["CACHE_FILE", "DefinitionCache"]

#: The cache's file name inside the state folder.
CACHE_FILE: Final = "definitions.json"
_FORMAT: Final = 1
_PARSER_MODULES: Final = (
    "definition",
    "fields",
    "frontmatter",
    "repair",
    "values",
    "cache",
    "translation",
    "dialects",
    "claude_code",
    "opencode",
)
_FIELDS: Final = {f.name for f in fields(AgentDefinition)}


def _fingerprint() -> str:
    here = Path(__file__).resolve().parent
    parts = [f"format={_FORMAT}", f"membrane={__version__}"]
    for name in _PARSER_MODULES:
        try:
            stat = os.stat(here / f"{name}.py")
        except OSError:
            continue
        parts.append(f"{name}={stat.st_size}:{stat.st_mtime_ns}")
    return ";".join(parts)


def _encode(definition: AgentDefinition) -> dict[str, Any]:
    return definition.to_json()


def _decode(data: dict[str, Any]) -> AgentDefinition:
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _FIELDS:
            raise ValueError(f"unknown field {key!r}")
        if key == "warnings":
            value = tuple(
                DefinitionWarning(w["path"], w["line"], w["code"], w["message"]) for w in value
            )
        elif isinstance(value, list) and key != "extra":
            value = tuple(value)
        values[key] = value
    return AgentDefinition(**values)


class DefinitionCache:
    """The cache file at ``path`` (``None``: no cache, every lookup misses)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._entries: dict[str, dict[str, Any]] | None = None
        self._fingerprint = ""
        self._dirty = False
        #: Lookups answered from the cache, and parses it could not spare.
        self.hits = 0
        self.misses = 0

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._entries is not None:
            return self._entries
        self._fingerprint = _fingerprint()
        entries: dict[str, dict[str, Any]] = {}
        if self.path is not None:
            try:
                data = json.loads(self.path.read_bytes())
                if isinstance(data, dict) and data.get("fingerprint") == self._fingerprint:
                    found = data.get("entries")
                    if isinstance(found, dict):
                        entries = found
            except (OSError, ValueError):
                pass
        self._entries = entries
        return entries

    def get(self, path: str, *, root: str, digest: bytes) -> AgentDefinition | None:
        """The definition parsed from ``path``'s content ``digest`` under ``root``, if kept."""
        if self.path is None:
            return None
        entry = self._load().get(path)
        if entry is not None and entry.get("digest") == digest.hex() and entry.get("root") == root:
            try:
                found = _decode(entry["definition"])
            except (KeyError, TypeError, ValueError):
                found = None
            if found is not None:
                self.hits += 1
                return found
        self.misses += 1
        return None

    def holds(self, path: str, *, root: str, digest: bytes) -> bool:
        """Whether an entry for ``path``'s content ``digest`` under ``root`` is kept (nothing is
        decoded); always true without a cache file, where there is nothing to keep."""
        if self.path is None:
            return True
        entry = self._load().get(path)
        return (
            entry is not None and entry.get("digest") == digest.hex() and entry.get("root") == root
        )

    def put(self, path: str, *, root: str, digest: bytes, definition: AgentDefinition) -> None:
        """Keep ``definition`` for ``path``'s content ``digest``, when JSON carries it exactly."""
        if self.path is None:
            return
        try:
            encoded = json.loads(json.dumps(_encode(definition), allow_nan=False))
            exact = _decode(encoded) == definition
        except (TypeError, ValueError):
            exact = False
        entries = self._load()
        if exact:
            entries[path] = {"digest": digest.hex(), "root": root, "definition": encoded}
            self._dirty = True
        elif entries.pop(path, None) is not None:
            self._dirty = True

    def retain(self, paths: set[str]) -> None:
        """Forget the entries of files that are no longer there."""
        if self._entries is None:
            return
        gone = self._entries.keys() - paths
        for path in gone:
            del self._entries[path]
        self._dirty = self._dirty or bool(gone)

    def save(self) -> None:
        """Write the cache if it changed (atomically, private to its owner); never raises."""
        if self.path is None or not self._dirty or self._entries is None:
            return
        folder = self.path.parent
        data = {"fingerprint": self._fingerprint, "entries": self._entries}
        with contextlib.suppress(OSError, TypeError, ValueError):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            handle, temp = tempfile.mkstemp(prefix=".definitions-", dir=folder)
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    json.dump(data, out, separators=(",", ":"))
                os.replace(temp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
            self._dirty = False
