"""Where a project's durable state lives, and the one-time move of state kept in the checkout.

DESIGN rule 9: a project's orchestration state (sessions, receipts, the outbox, the lineage
ledger, leases, workflow state) is ``$MEMBRANE_HOME/projects/<project-id>/state.db``, never
inside a folder a child may write. ``<project-id>`` is the project folder's name (made safe
for a file name) and the first 16 hex digits of the SHA-256 of its resolved path, so two
projects with the same name never share a store and the id is stable across runs.

Earlier versions kept the file at ``<project>/.membrane/state.db``. ``open_project_state``
moves such a file on first open: it copies it with SQLite's online backup (which folds in
whatever the write-ahead log still holds), syncs the copy, renames it into place and only then
removes the old file and its ``-wal``/``-shm`` companions. A crash at any point leaves either
the old file (the move runs again at the next open) or the new one. A lock file serialises two
processes moving the same project at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from hashlib import sha256
else:
    try:  # hashlib's own SHA-256, without hashlib loading OpenSSL for the algorithms it wraps
        from _sha256 import sha256
    except ImportError:  # an interpreter that names the built-in module otherwise
        from hashlib import sha256

__all__ = [
    "LEGACY_STATE",
    "StateLocation",
    "locate_state",
    "migrate_legacy_state",
    "project_id",
]

#: Where earlier versions kept a project's state, relative to the project folder.
LEGACY_STATE: Final = Path(".membrane") / "state.db"
_STATE_NAME: Final = "state.db"
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")


def project_id(project: Path) -> str:
    """The stable id of a project folder: ``<name>-<16 hex digits of its path's SHA-256>``."""
    resolved = project.resolve()
    name = _UNSAFE.sub("-", resolved.name).strip("-.")[:40] or "project"
    digest = sha256(str(resolved).encode("utf-8", "surrogateescape")).hexdigest()
    return f"{name}-{digest[:16]}"


@dataclass(frozen=True, slots=True)
class StateLocation:
    """The state file of one project: ``path`` (where it lives now) and ``legacy`` (where an
    earlier version kept it, inside the project)."""

    project: Path
    path: Path
    legacy: Path

    @property
    def exists(self) -> bool:
        """Whether there is state to read, here or still at the legacy place."""
        return self.path.exists() or self.legacy.exists()


def locate_state(project: Path, *, home: Path) -> StateLocation:
    """The state location of ``project`` under the Membrane home ``home``."""
    resolved = project.resolve()
    path = home / "projects" / project_id(resolved) / _STATE_NAME
    return StateLocation(project=resolved, path=path, legacy=resolved / LEGACY_STATE)


def migrate_legacy_state(location: StateLocation) -> bool:
    """Move a legacy ``<project>/.membrane/state.db`` to ``location.path``, once.

    Returns whether a file was moved. Nothing happens when there is no legacy file, or when
    the new file already exists (then the legacy file is left alone: two stores were made, and
    which one is right is the user's call). Failures are ``StoreError`` and leave the legacy
    file in place.
    """
    if not location.legacy.is_file():
        return False
    from membrane.store.state_move import move_legacy_state  # only a move needs the rest

    return move_legacy_state(location.project, location.legacy, location.path)
