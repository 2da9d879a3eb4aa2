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

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

from membrane._record import record
from membrane.errors import StoreError

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


@record(frozen=True, slots=True)
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
    legacy, target = location.legacy, location.path
    if not legacy.is_file():
        return False
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise StoreError(
            f"cannot create {target.parent} to move the project state into: {exc}",
            path=str(target),
        ) from exc
    with _locked(target.parent / ".migrate.lock"):
        if target.exists() or not legacy.is_file():
            return False
        partial = target.with_name(f".{_STATE_NAME}.moving")
        _backup(legacy, partial)
        os.replace(partial, target)
        _sync_folder(target.parent)
        (target.parent / "project").write_text(f"{location.project}\n", encoding="utf-8")
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                legacy.with_name(legacy.name + suffix).unlink()
    return True


def _backup(source: Path, destination: Path) -> None:
    import sqlite3  # only a move needs it; finding the state folder does not

    with contextlib.suppress(FileNotFoundError):
        destination.unlink()
    try:
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        try:
            dst = sqlite3.connect(destination)
            try:
                src.backup(dst)
                dst.execute("PRAGMA journal_mode = WAL")
            finally:
                dst.close()
        finally:
            src.close()
        with open(destination, "rb+") as handle:
            os.fsync(handle.fileno())
    except (sqlite3.Error, OSError) as exc:
        with contextlib.suppress(FileNotFoundError):
            destination.unlink()
        raise StoreError(
            f"cannot move the project state {source} to {destination.parent}: {exc}; "
            "the old file is left in place",
            path=str(source),
        ) from exc


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
