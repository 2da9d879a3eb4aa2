"""Which store a command or a runtime opens: a SQLite file, or a PostgreSQL database.

The state is named by ``--state`` (a file path, or a ``postgresql://`` URL), else by the
``MEMBRANE_STATE_URL`` environment variable, else by the settings' ``state_url``, else it is
the project's own file (``$MEMBRANE_HOME/projects/<project-id>/state.db``). A URL is kept as
text (a ``Path`` would fold its ``//``); its password is shown masked wherever the state is
named (``shown``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from membrane.store.urls import is_postgres_url, redact_url

if TYPE_CHECKING:
    from membrane.store.base import Store

__all__ = [
    "STATE_URL_ENV",
    "StateTarget",
    "chosen_state",
    "open_reader",
    "open_writer",
    "shown",
    "target_of",
]

#: The environment variable naming a PostgreSQL state for every command and runtime.
STATE_URL_ENV = "MEMBRANE_STATE_URL"

#: A SQLite file (``Path``) or a PostgreSQL URL (``str``).
StateTarget = Path | str


def target_of(value: str | Path) -> StateTarget:
    """``--state``'s text as a target: a URL stays text, anything else is a file path."""
    text = str(value)
    return text if is_postgres_url(text) else Path(text)


def chosen_state(state: str | Path | None, *, settings_url: str | None) -> StateTarget | None:
    """The state named by ``state`` (``--state``), else ``MEMBRANE_STATE_URL``, else the
    settings' ``state_url``; ``None`` when none names one (the project's own file)."""
    if state is not None:
        return target_of(state)
    env = os.environ.get(STATE_URL_ENV, "").strip()
    if env:
        return env
    return settings_url or None


def shown(target: StateTarget) -> str:
    """How a target is named in output and errors (a URL's password masked)."""
    return redact_url(target) if isinstance(target, str) else str(target)


def open_reader(target: StateTarget) -> Store:
    """A store to read ``target`` with: a SQLite file opened read only (nothing created or
    migrated), or the PostgreSQL database (migrated to this Membrane's schema when older)."""
    if isinstance(target, str):
        from membrane.store.postgres import PostgresStore

        return PostgresStore(target, min_size=0, max_size=2)
    from membrane.store.sqlite import SQLiteStore

    return SQLiteStore(target, read_only=True)


def open_writer(target: StateTarget) -> Store:
    """A store to change ``target`` with (an existing SQLite file, or the database)."""
    if isinstance(target, str):
        from membrane.store.postgres import PostgresStore

        return PostgresStore(target, min_size=0, max_size=2)
    from membrane.store.sqlite import SQLiteStore

    return SQLiteStore(target)
