"""What writes the definition cache (``membrane.agents.cache``): a definition encoded as JSON
data, and the atomic write of the cache file. A listing whose files all hit the cache reads it
and never writes, so it does not import this."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, Final

from membrane.agents.definition import AgentDefinition, DefinitionWarning
from membrane.config.budget import Budget
from membrane.config.values import McpServerSpec
from membrane.tools.rules import PermissionRule

__all__ = ["encode", "write_entries"]

_FIELDS: Final = fields(AgentDefinition)
_NAMES_IN_ORDER: Final = tuple(f.name for f in _FIELDS)
#: Each field's default, for the fields that have a plain one (``UNSET`` for most).
_DEFAULTS: Final = {f.name: f.default for f in _FIELDS if f.default is not MISSING}
#: The fields whose default is a fresh empty mapping.
_EMPTY_MAPPINGS: Final = frozenset(f.name for f in _FIELDS if f.default_factory is not MISSING)


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
    for name in _NAMES_IN_ORDER:
        value = getattr(definition, name)
        if name in _EMPTY_MAPPINGS and not value:
            continue
        if name in _DEFAULTS and value == _DEFAULTS[name] and type(value) is type(_DEFAULTS[name]):
            continue
        out[name] = _plain(value)
    return out
