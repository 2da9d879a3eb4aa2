"""The event writer on a real SQLite file: queued events join the next commit that comes
within the hub's write delay (no transaction of their own), and are written by the writer
itself when none comes; closing the hub ends the writer's wait at once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from membrane.runtime.events import EventHub
from membrane.store import SessionHeader, SQLiteStore

pytestmark = pytest.mark.anyio


def counting(into: list[str]) -> Callable[[str], None]:
    def trace(statement: str) -> None:
        if statement.strip().upper() == "COMMIT":
            into.append(statement)

    return trace


def opened(path: Path, commits: list[str]) -> SQLiteStore:
    store = SQLiteStore(path, synchronous="normal", trace=counting(commits))
    for session in ("a", "b"):
        store.create_session(SessionHeader(session, "worker", None, 0, "running"))
    commits.clear()
    return store


async def test_a_queued_event_joins_the_next_commit_within_the_delay(tmp_path: Path) -> None:
    commits: list[str] = []
    store = opened(tmp_path / "state.db", commits)
    hub = EventHub(store, write_delay=3600.0)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(hub.writer)
            await anyio.wait_all_tasks_blocked()
            hub.post(run_id="a", parent_id=None, agent="worker", kind="turn", data={"turn": 1})
            await anyio.wait_all_tasks_blocked()  # the writer woke, and waits for a commit
            assert commits == []
            hub.commit(lambda: store.append_event("b", "published", {}))
            assert len(commits) == 1  # the queued event and the work, one transaction
            assert [(e.session_id, e.kind) for e in store.events()] == [
                ("a", "turn"),
                ("b", "published"),
            ]
            hub.close()  # ends the writer's wait at once, the delay notwithstanding
    store.close()


async def test_with_no_commit_to_join_the_writer_writes_the_events_itself(tmp_path: Path) -> None:
    commits: list[str] = []
    store = opened(tmp_path / "state.db", commits)
    hub = EventHub(store, write_delay=0.001)
    stream = hub.subscribe()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(hub.writer)
            for turn in (1, 2):
                data = {"turn": turn}
                hub.post(run_id="a", parent_id=None, agent="worker", kind="turn", data=data)
            first, second = await stream.__anext__(), await stream.__anext__()
            assert (first.kind, first.data, second.data) == ("turn", {"turn": 1}, {"turn": 2})
            assert 0 < first.seq < second.seq
            assert len(commits) == 1  # both in the writer's one transaction
            hub.close()
    store.close()
