"""Parses of settings files kept by content digest: reading unchanged ``config.toml`` files
imports no TOML parser.

``tomllib`` (with the ``datetime`` and ``string`` modules and the regular expressions it
compiles) costs about a third of the bare interpreter's start, and every command reads the same
one or two settings files. The parse of each is kept in ``<membrane home>/cache/settings.json``
under the file's path and the BLAKE2b digest of its text, as JSON; a parse holding what JSON
cannot carry exactly (TOML's dates and times) is not kept. What comes back is checked as a fresh
parse is (``membrane.config.load``), and a cache that cannot be read or written is a miss.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Final

try:  # the built-in BLAKE2b: ``hashlib`` would load OpenSSL
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

__all__ = ["SETTINGS_CACHE_FILE", "TomlCache"]

#: The cache's file name in ``<membrane home>/cache``.
SETTINGS_CACHE_FILE: Final = "settings.json"
_FORMAT: Final = 1


class TomlCache:
    """The parses kept in the file at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        #: file path -> [digest (hex), the parse as JSON text]
        self._entries: dict[str, Any] | None = None
        self._dirty = False

    def _load(self) -> dict[str, Any]:
        if self._entries is None:
            self._entries = {}
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(self.path.read_bytes())
                if isinstance(data, dict) and data.get("format") == _FORMAT:
                    found = data.get("entries")
                    if isinstance(found, dict):
                        self._entries = found
        return self._entries

    def loads(self, path: Path, content: str) -> dict[str, Any]:
        """``tomllib.loads(content)``, raising its ``TOMLDecodeError``; from the cache when
        ``path`` held the same text before. Each call returns a fresh parse."""
        digest = blake2b(content.encode("utf-8", "surrogatepass"), digest_size=32).hexdigest()
        entries = self._load()
        entry = entries.get(str(path))
        if type(entry) is list and len(entry) == 2 and entry[0] == digest:
            with contextlib.suppress(TypeError, ValueError):
                kept = json.loads(entry[1])
                if type(kept) is dict:
                    return kept
        import tomllib  # only for a file whose text the cache has not seen

        parsed = tomllib.loads(content)
        try:
            text = json.dumps(parsed)
        except (TypeError, ValueError):  # a date or a time: JSON would not give it back
            return parsed
        entries[str(path)] = [digest, text]
        self._dirty = True
        return parsed

    def save(self) -> None:
        """Write the cache atomically, private to its owner, when a parse was added (never
        raises: a cache is only ever a shortcut)."""
        if not self._dirty or self._entries is None:
            return
        self._dirty = False
        folder = self.path.parent
        data = {"format": _FORMAT, "entries": self._entries}
        with contextlib.suppress(OSError):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            partial = folder / f".{self.path.name}.{os.getpid()}"
            try:
                handle = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    json.dump(data, out, separators=(",", ":"))
                os.replace(partial, self.path)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(partial)
