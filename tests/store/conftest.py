"""Fixtures of the store tests: the contract runs against ``SQLiteStore``, ``PostgresStore`` (a
schema of the session's private cluster) and ``MemoryStore`` alike, on a clock the test moves
by hand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from store_support import Clock

from membrane.store import MemoryStore, PostgresStore, SQLiteStore, Store


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Iterator[Store]:
    """A fresh store of each kind on ``clock``."""
    opened: Store
    if request.param == "sqlite":
        opened = SQLiteStore(tmp_path / "state.db", clock=clock)
    elif request.param == "postgres":
        opened = PostgresStore(request.getfixturevalue("postgres_url"), clock=clock)
    else:
        opened = MemoryStore(clock=clock)
    yield opened
    opened.close()
