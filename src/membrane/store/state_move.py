"""The one-time move of a project's legacy ``<project>/.membrane/state.db`` to its state
location (``membrane.store.location`` describes it and imports this when a move is due)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from membrane.errors import StoreError

__all__ = ["move_legacy_state"]


def move_legacy_state(project: Path, legacy: Path, target: Path) -> bool:
    """Move ``project``'s ``legacy`` file to ``target`` (``migrate_legacy_state``'s work once a
    legacy file was seen): a copy by SQLite's online backup, synced, renamed into place, then
    the old files removed; False when another process moved it first or the new file exists."""
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
        partial = target.with_name(f".{target.name}.moving")
        _backup(legacy, partial)
        os.replace(partial, target)
        _sync_folder(target.parent)
        (target.parent / "project").write_text(f"{project}\n", encoding="utf-8")
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
