"""Finding an executable on ``PATH`` as ``shutil.which`` does, without importing ``shutil``
(and the compression modules it imports): the commands that only look for ``bwrap``, ``bash``
or a browser, such as ``membrane explain``, pay for none of them."""

from __future__ import annotations

import os

__all__ = ["which"]


def which(name: str) -> str | None:
    """``shutil.which(name)`` on POSIX: ``name`` itself when it has a folder part, else the
    first entry of ``PATH`` (the system's default path when it is unset) holding an
    executable file of that name."""
    if os.path.dirname(name):
        return name if _executable(name) else None
    path: str | None = os.environ.get("PATH")
    if path is None:
        try:
            path = os.confstr("CS_PATH")
        except (AttributeError, ValueError):
            path = os.defpath
    if not path:
        return None
    seen: set[str] = set()
    for folder in path.split(os.pathsep):
        if folder in seen:
            continue
        seen.add(folder)
        candidate = os.path.join(folder, name)
        if _executable(candidate):
            return candidate
    return None


def _executable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.F_OK | os.X_OK) and not os.path.isdir(path)
