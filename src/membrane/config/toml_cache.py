"""Checked settings files kept by content digest: reading unchanged ``config.toml`` files
neither parses nor validates them again.

Every command reads the same one or two settings files, and parsing (``tomllib``) and checking
(pydantic, ``membrane.config.schema``) them costs more than the rest of a listing. The checked
values of each file are kept in ``<membrane home>/cache/settings.json`` under the file's path
and the BLAKE2b digest of its text and of the schema's source, as JSON: a changed file or a
changed schema is a miss. Values holding what JSON cannot carry exactly (TOML's dates and times)
are not kept, a file that fails its check is never kept, and a cache that cannot be read or
written is a miss. The file is private to its owner, under the Membrane home that no child may
read or write (DESIGN rules 9 and 14): whoever can change it can change the settings themselves.
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

__all__ = ["SETTINGS_CACHE_FILE", "TomlCache", "digest_of"]

#: The cache's file name in ``<membrane home>/cache``.
SETTINGS_CACHE_FILE: Final = "settings.json"
_FORMAT: Final = 2


def digest_of(*texts: str) -> str:
    """The BLAKE2b digest of ``texts`` together (the file's and the schema's source)."""
    digest = blake2b(digest_size=32)
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


class TomlCache:
    """The checked values kept in the file at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        #: file path -> [digest (hex), the checked values as JSON text]
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

    def get(self, path: Path, digest: str) -> dict[str, Any] | None:
        """The values kept for ``path`` under ``digest`` (``digest_of`` its text), or ``None``.
        Each call returns a fresh copy."""
        entry = self._load().get(str(path))
        if type(entry) is list and len(entry) == 2 and entry[0] == digest:
            with contextlib.suppress(TypeError, ValueError):
                kept = json.loads(entry[1])
                if type(kept) is dict:
                    return kept
        return None

    def put(self, path: Path, digest: str, values: dict[str, Any]) -> None:
        """Keep ``values`` for ``path`` under ``digest``, unless JSON cannot give them back."""
        try:
            text = json.dumps(values)
        except (TypeError, ValueError):  # a date or a time: JSON would not give it back
            return
        self._load()[str(path)] = [digest, text]
        self._dirty = True

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
