"""The installed ``membrane.extensions`` entry points, remembered between processes.

Asking ``importlib.metadata`` for the entry points imports it (and ``email``, ``zipfile``,
``csv``) and reads the metadata of every installed distribution: tens of milliseconds at the
start of every command that opens a workspace. What it answers changes only when a
distribution is installed, removed or changed, so the answer is kept in a small JSON file
(``<membrane home>/cache/entry-points.json``) under a key that changes with them: each
``sys.path`` entry with its modification time, and each ``*.dist-info`` / ``*.egg-info`` in
it with the time and size of its ``entry_points.txt``. Installing or removing a distribution
changes its folder's time; rewriting an ``entry_points.txt`` changes that file's. Computing
the key costs one ``scandir`` per path entry and one ``stat`` per distribution.

The file keeps one answer per ``sys.path`` (the console script and ``python -m membrane`` see
different ones), the ``MAX_ANSWERS`` most recently written. A missing, unreadable, malformed or
stale answer is ignored and rewritten; a cache that cannot be written is skipped silently: it is
only ever a shortcut, never the source.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Final

__all__ = ["ENTRY_POINTS_FILE", "MAX_ANSWERS", "installed_entry_points"]

#: The cache's file name inside ``<membrane home>/cache``.
ENTRY_POINTS_FILE: Final = "entry-points.json"
#: Answers kept in the file, one per ``sys.path``.
MAX_ANSWERS: Final = 8
_FORMAT: Final = 2
_METADATA_SUFFIXES: Final = (".dist-info", ".egg-info")


def installed_entry_points(group: str, *, cache: Path | None = None) -> dict[str, str]:
    """Name -> ``module:attr`` of every installed entry point in ``group``, as
    ``importlib.metadata.entry_points(group=group)`` lists them (a later one of the same name
    wins). ``cache``: the file that remembers the answer while the installation is unchanged
    (``None``: always ask ``importlib.metadata``)."""
    answers: dict[str, object] = {}
    path = "\0".join([group, *sys.path])
    key: list[object] = []
    if cache is not None:
        answers = _read(cache)
        key = [_FORMAT, _installation()]
        found = _points(answers.get(path), key)
        if found is not None:
            return found
    from importlib.metadata import entry_points

    found = {}
    for point in entry_points(group=group):
        found[point.name] = point.value
    if cache is not None:
        answers.pop(path, None)
        answers[path] = {"key": key, "points": found}
        _write(cache, dict(list(answers.items())[-MAX_ANSWERS:]))
    return found


def _installation() -> list[list[object]]:
    """What the entry points depend on: every ``sys.path`` entry and the distributions in it."""
    parts: list[list[object]] = []
    for entry in sys.path:
        folder = entry or "."
        try:
            info = os.stat(folder)
        except OSError:
            parts.append([entry])
            continue
        parts.append([entry, info.st_mtime_ns, info.st_size])
        try:
            with os.scandir(folder) as listing:
                names = sorted(e.name for e in listing if e.name.endswith(_METADATA_SUFFIXES))
        except OSError:  # a zip archive (its time and size above), or unreadable
            continue
        for name in names:
            try:
                points = os.stat(os.path.join(folder, name, "entry_points.txt"))
            except OSError:
                parts.append([name])
                continue
            parts.append([name, points.st_mtime_ns, points.st_size])
    return parts


def _read(cache: Path) -> dict[str, object]:
    """The answers the file keeps, by ``sys.path`` (empty when it cannot be read)."""
    try:
        data = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    answers = data.get("answers") if isinstance(data, dict) else None
    return answers if isinstance(answers, dict) else {}


def _points(answer: object, key: list[object]) -> dict[str, str] | None:
    """The entry points ``answer`` keeps, when it was written under ``key``."""
    if not isinstance(answer, dict) or answer.get("key") != key:
        return None
    points = answer.get("points")
    if not isinstance(points, dict) or not all(
        isinstance(name, str) and isinstance(value, str) for name, value in points.items()
    ):
        return None
    return points


def _write(cache: Path, answers: dict[str, object]) -> None:
    import tempfile  # only when the answers changed: a cache hit writes nothing

    text = json.dumps({"format": _FORMAT, "answers": answers})
    with contextlib.suppress(OSError):
        cache.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, temp = tempfile.mkstemp(dir=cache.parent, prefix=".entry-points-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(temp, cache)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
