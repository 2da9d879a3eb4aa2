"""Parsed definitions by content digest, kept in the project's state folder across processes.

Parsing a definition (ruamel's pure-Python YAML) costs about a millisecond; reading and hashing
the file costs a few microseconds. A process that starts cold takes the definition from this
cache when the file at that path, under that root, still has the digest of its entry: only a
changed file is parsed again. A file whose stat signature (modification and change times,
size, inode) is the one its entry recorded is not even read: that signature was recorded only
for a file read at least two seconds after its last change (``scan._settled``), and any later
change gives the file a newer change time, which no call can set back.

The cache is one JSON file (never pickle: nothing read back can run code). An entry is
written only when decoding its JSON gives back exactly the definition that was parsed, so a
value JSON cannot carry (a date in an unknown key) just keeps its file uncached. The file
names the Membrane version and the size and time of the parser's own modules, so a parser
that changed never serves an old answer. A missing, unreadable, malformed or foreign cache
is ignored (and rewritten); a cache that cannot be written is skipped silently: it is only
ever a shortcut.

An entry is ``[digest, root, fields, signature]``, with only the fields that differ from their
defaults, and ``signature`` ``null`` when the file was read too soon after a change to trust it.
A hit decodes those fields and fills the definition's slots directly: no per-definition
validation beyond the digest, since the entry was checked to decode to exactly the parsed
definition when it was written, and the fingerprint rules out a different parser.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, Final

from membrane._version import __version__
from membrane.agents.definition import AgentDefinition, DefinitionWarning
from membrane.config.budget import Budget
from membrane.config.values import McpServerSpec
from membrane.tools.rules import Condition, PermissionRule

__all__ = [
    "CACHE_FILE",
    "DefinitionCache",
    "encode",
    "parser_fingerprint",
    "read_entries",
    "write_entries",
]

#: The cache's file name inside the state folder.
CACHE_FILE: Final = "definitions.json"
_new = object.__new__
_FORMAT: Final = 4
_PARSER_MODULES: Final = (
    "definition",
    "fields",
    "frontmatter",
    "repair",
    "values",
    "cache",
    "hook_reading",
    "translation",
    "dialects",
    "claude_code",
    "opencode",
    "codex",
    "codex_file",
    "copilot",
)
_FIELDS: Final = fields(AgentDefinition)
_NAMES: Final = frozenset(f.name for f in _FIELDS)
#: Each field's default, for the fields that have a plain one (``UNSET`` for most).
_DEFAULTS: Final = {f.name: f.default for f in _FIELDS if f.default is not MISSING}
#: The fields whose default is a fresh empty mapping.
_EMPTY_MAPPINGS: Final = frozenset(f.name for f in _FIELDS if f.default_factory is not MISSING)
#: Each field's slot, set in declaration order; a decoded definition is built slot by slot
#: (what the dataclass's own ``__init__`` does, without its keyword handling).
_SLOTS: Final = tuple((f.name, getattr(AgentDefinition, f.name).__set__) for f in _FIELDS)
_DIRECT: Final = not hasattr(AgentDefinition, "__post_init__")


def _tokens(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _rules(value: list[list[Any]]) -> tuple[PermissionRule, ...]:
    return tuple(_rule(*rule) for rule in value)


def _rule(*head: Any) -> PermissionRule:
    if len(head) <= 6:
        return PermissionRule(*head)
    conditions = tuple(
        Condition(argument, test, tuple(v) if isinstance(v, list) else v, present)
        for argument, test, v, present in head[6]
    )
    tool, pattern, verdict, text, source, grants = head[:6]
    return PermissionRule(tool, pattern, verdict, text, source, grants, conditions, head[7])


def _warnings(value: list[list[Any]]) -> tuple[DefinitionWarning, ...]:
    return tuple(DefinitionWarning(*warning) for warning in value)


def _servers(value: dict[str, Any]) -> dict[str, McpServerSpec | None]:
    return {
        name: None if spec is None else McpServerSpec(**{**spec, "args": tuple(spec["args"])})
        for name, spec in value.items()
    }


#: How the fields JSON cannot carry as they are come back.
_DECODERS: Final[dict[str, Callable[[Any], Any]]] = {
    "tools": tuple,
    "disallowed_tools": tuple,
    "ask_tools": tuple,
    "exclude_extensions": tuple,
    "allowed_subagents": tuple,
    "read_paths": tuple,
    "extensions": _tokens,
    "skills": _tokens,
    "rules": _rules,
    "warnings": _warnings,
    "budget": lambda value: Budget(**value),
    "mcp_servers": _servers,
}


def parser_fingerprint(modules: Sequence[str], *, fmt: int) -> str:
    """The cache format, the Membrane version and the size and time of each of the parser's
    ``modules`` (files of this package): a cache written under another parser never matches."""
    here = Path(__file__).resolve().parent
    parts = [f"format={fmt}", f"membrane={__version__}"]
    for name in modules:
        try:
            stat = os.stat(here / f"{name}.py")
        except OSError:
            continue
        parts.append(f"{name}={stat.st_size}:{stat.st_mtime_ns}")
    return ";".join(parts)


def read_entries(path: Path | None, fingerprint: str) -> dict[str, Any]:
    """The entries of the cache file at ``path`` when it was written under ``fingerprint``;
    empty when there is none, or it cannot be read, or it is another parser's."""
    if path is not None:
        try:
            data = json.loads(path.read_bytes())
            if isinstance(data, dict) and data.get("fingerprint") == fingerprint:
                found = data.get("entries")
                if isinstance(found, dict):
                    return found
        except (OSError, ValueError):
            pass
    return {}


def _decode(data: dict[str, Any]) -> AgentDefinition:
    """The definition ``_encode`` wrote; ``ValueError``/``TypeError``/``KeyError`` for
    anything else."""
    if not isinstance(data, dict) or data.keys() - _NAMES:
        raise ValueError("not an encoded definition")
    values = _DEFAULTS.copy()
    values.update(data)
    for key in _DECODERS.keys() & data.keys():
        values[key] = _DECODERS[key](data[key])
    for key in _EMPTY_MAPPINGS - data.keys():
        values[key] = {}
    if not _DIRECT:
        return AgentDefinition(**values)
    definition = _new(AgentDefinition)
    for name, setter in _SLOTS:
        setter(definition, values[name])
    return definition


class DefinitionCache:
    """The cache file at ``path`` (``None``: no cache, every lookup misses)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        #: path -> [digest (hex), root, the encoded definition]
        self._entries: dict[str, list[Any]] | None = None
        self._fingerprint = ""
        self._dirty = False
        #: Lookups answered from the cache, and parses it could not spare.
        self.hits = 0
        self.misses = 0

    def _load(self) -> dict[str, list[Any]]:
        if self._entries is not None:
            return self._entries
        self._fingerprint = parser_fingerprint(_PARSER_MODULES, fmt=_FORMAT)
        entries: dict[str, list[Any]] = read_entries(self.path, self._fingerprint)
        self._entries = entries
        return entries

    def get(
        self, path: str, *, root: str, digest: bytes, signature: Sequence[int] | None = None
    ) -> AgentDefinition | None:
        """The definition parsed from ``path``'s content ``digest`` under ``root``, if kept.
        ``signature``: the file's stat signature when the caller trusts it (the file changed
        long enough before it was read), recorded on the entry for the next cold start
        (``known``)."""
        if self.path is None:
            return None
        entries = self._entries if self._entries is not None else self._load()
        entry = entries.get(path)
        if entry is not None and self._matches(entry, root=root, digest=digest):
            found = self._decoded(entry[2])
            if found is not None:
                if signature is not None and entry[3] != list(signature):
                    entry[3] = list(signature)
                    self._dirty = True
                return found
        self.misses += 1
        return None

    def known(
        self, path: str, *, root: str, signature: Sequence[int]
    ) -> tuple[bytes, AgentDefinition] | None:
        """The digest and definition of ``path`` under ``root`` when its entry recorded the
        stat ``signature`` the file has now; nothing is read. The caller trusts ``signature``:
        the file changed long enough before now that any later change has a newer one."""
        if self.path is None:
            return None
        entries = self._entries if self._entries is not None else self._load()
        entry = entries.get(path)
        if (
            type(entry) is list
            and len(entry) == 4
            and entry[1] == root
            and entry[3] == list(signature)
            and type(entry[0]) is str
        ):
            try:
                digest = bytes.fromhex(entry[0])
            except ValueError:  # a damaged entry is a miss, never an error
                return None
            found = self._decoded(entry[2])
            if found is not None:
                return digest, found
        return None

    def _decoded(self, data: Any) -> AgentDefinition | None:
        try:
            found = _decode(data)
        except Exception:  # a damaged entry is a miss, never an error
            return None
        self.hits += 1
        return found

    def holds(self, path: str, *, root: str, digest: bytes) -> bool:
        """Whether an entry for ``path``'s content ``digest`` under ``root`` is kept (nothing is
        decoded); always true without a cache file, where there is nothing to keep."""
        if self.path is None:
            return True
        return self._matches(self._load().get(path), root=root, digest=digest)

    @staticmethod
    def _matches(entry: object, *, root: str, digest: bytes) -> bool:
        return (
            type(entry) is list
            and len(entry) == 4
            and entry[0] == digest.hex()
            and entry[1] == root
        )

    def put(
        self,
        path: str,
        *,
        root: str,
        digest: bytes,
        definition: AgentDefinition,
        signature: Sequence[int] | None = None,
    ) -> None:
        """Keep ``definition`` for ``path``'s content ``digest``, when JSON carries it exactly;
        with the file's stat ``signature`` when the caller trusts it (as for ``get``)."""
        if self.path is None:
            return
        try:
            encoded = json.loads(json.dumps(encode(definition), allow_nan=False))
            exact = _decode(encoded) == definition
        except Exception:  # anything JSON or the decoder cannot carry stays uncached
            exact = False
        entries = self._load()
        if exact:
            entries[path] = [
                digest.hex(),
                root,
                encoded,
                None if signature is None else list(signature),
            ]
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
        if write_entries(self.path, self._fingerprint, self._entries):
            self._dirty = False


# -- writing ---------------------------------------------------------------------------------


def write_entries(path: Path, fingerprint: str, entries: Mapping[str, object]) -> bool:
    """Write the cache file atomically, private to its owner; False when it cannot be written
    (never raises: a cache is only ever a shortcut)."""
    folder = path.parent
    data = {"fingerprint": fingerprint, "entries": entries}
    with contextlib.suppress(OSError, TypeError, ValueError):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        import tempfile  # only a cache that changed is written

        handle, temp = tempfile.mkstemp(prefix=f".{path.stem}-", dir=folder)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(data, out, separators=(",", ":"))
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        return True
    return False


def _plain(value: Any) -> Any:
    """A field's value as JSON data (the inverse of ``_DECODERS``)."""
    if isinstance(value, PermissionRule):
        head: list[Any] = [value.tool, value.pattern, value.verdict, value.text, value.source]
        head.append(value.grants)
        if value.conditions:
            conditions = [
                [c.argument, c.test, _plain(c.value), c.when_present] for c in value.conditions
            ]
            head += [conditions, value.reason]
        return head
    if isinstance(value, DefinitionWarning):
        return [value.path, value.line, value.code, value.message]
    if isinstance(value, Budget):
        return value.to_dict()
    if isinstance(value, McpServerSpec):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


def encode(definition: AgentDefinition) -> dict[str, Any]:
    """The fields that differ from their default, as JSON data."""
    out: dict[str, Any] = {}
    for name in (f.name for f in _FIELDS):
        value = getattr(definition, name)
        if name in _EMPTY_MAPPINGS and not value:
            continue
        if name in _DEFAULTS and value == _DEFAULTS[name] and type(value) is type(_DEFAULTS[name]):
            continue
        out[name] = _plain(value)
    return out
