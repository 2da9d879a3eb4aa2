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

``refuse_checkout`` keeps a store from being created there by accident: ``SQLiteStore`` calls it
before it creates a file, and refuses a new file inside a git checkout or a project folder
(``state-inside-checkout``) unless it is a project's own state location under a Membrane home.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from membrane.errors import StateInsideCheckout

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
    "refuse_checkout",
]

#: Where earlier versions kept a project's state, relative to the project folder.
LEGACY_STATE: Final = Path(".membrane") / "state.db"
_STATE_NAME: Final = "state.db"
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
_PROJECT_ID: Final = re.compile(r"[A-Za-z0-9._-]*-[0-9a-f]{16}")


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


def refuse_checkout(path: Path) -> None:
    """Refuse (``StateInsideCheckout``) to create a store at ``path`` inside a git checkout or
    a project folder: a folder holding ``.git``, or a ``.membrane`` folder other than the
    Membrane home. A project's state location (``HOME/projects/<project-id>/state.db``) and
    anything under ``$MEMBRANE_HOME`` are always allowed.
    """
    from membrane.config.load import membrane_home  # only a new store's creation needs it

    target = path.resolve()
    folder = target.parent
    if (
        target.name == _STATE_NAME
        and folder.parent.name == "projects"
        and _PROJECT_ID.fullmatch(folder.name)
    ):
        return
    home = membrane_home().resolve()
    if target.is_relative_to(home):
        return
    for ancestor in (folder, *folder.parents):
        for marker in (".git", ".membrane"):
            found = ancestor / marker
            if ancestor.name == marker:  # inside the control folder itself, made or not yet
                raise _refused(target, ancestor.parent, marker)
            if marker == ".git" and found.exists():
                raise _refused(target, ancestor, marker)
            if marker == ".membrane" and found.is_dir() and found.resolve() != home:
                raise _refused(target, ancestor, marker)


def _refused(target: Path, folder: Path, marker: str) -> StateInsideCheckout:
    return StateInsideCheckout(
        f"refusing to create a Membrane store at {target}: it would be inside {folder} (it "
        f"holds {marker}), where a child writing in its checkout could change it; leave --state "
        "out to keep the state under $MEMBRANE_HOME/projects/<project-id>/, or give a path "
        "outside that folder",
        path=str(target),
        folder=str(folder),
        marker=marker,
    )
