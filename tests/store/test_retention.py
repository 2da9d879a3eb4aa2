"""Retention: what ``prune`` deletes with a finished run, and what it must keep (SQLite and
PostgreSQL alike)."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import pytest

from membrane.config import Retention, load_settings
from membrane.errors import SettingsError
from membrane.store import PostgresStore, SessionHeader, SQLiteStore
from membrane.testing import stored_receipt

DAY = 86_400.0
NOW = 100 * DAY
OLD = NOW - 40 * DAY
EVERY = ("aborted", "completed", "error", "interrupted", "stopped", "wrapped_up")


class _Clock:
    def __init__(self) -> None:
        self.now = OLD

    def __call__(self) -> float:
        return self.now


Pruned = SQLiteStore | PostgresStore


def _run(
    store: Pruned, run_id: str, *, status: str = "completed", parent: str | None = None
) -> None:
    """A run as the runtime leaves it: header, events, transcript, spawn receipt, lineage edge
    (under ``parent``), and its completion notice delivered."""
    depth = 0 if parent is None else 1
    store.create_session(SessionHeader(run_id, "worker", parent, depth, "running"))
    store.append_event(run_id, "published", {"depth": depth})
    store.append_messages(run_id, [{"role": "user", "content": "go"}] * 3, start=0)
    assert store.begin_receipt(f"start-{run_id}", kind="spawn") is None
    store.complete_receipt(f"start-{run_id}", {"run": {"run_id": run_id}})
    if parent is not None:
        store.record_edge(
            parent_id=parent,
            child_id=run_id,
            child_role="worker",
            brief_digest="0" * 64,
            spawn_fingerprint={},
        )
        notice = store.enqueue_outbox(parent, {"run_id": run_id, "status": status})
        store.mark_delivered(notice)
    if status != "running":
        store.set_status(run_id, status, result={"run_id": run_id, "status": status})
        store.append_event(run_id, status, {})


def _days(days: float, **more: object) -> Retention:
    return Retention(runs_days=MappingProxyType(dict.fromkeys(EVERY, days)), **more)  # type: ignore[arg-type]


def _rows(store: Pruned, table: str) -> int:
    # A count no public method gives.
    if isinstance(store, PostgresStore):
        with store._use("test") as cur:
            return int(cur.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    with store._guard("test") as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


@pytest.fixture(params=["sqlite", "postgres"])
def clocked(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Pruned, _Clock]:
    clock = _Clock()
    store: Pruned
    if request.param == "sqlite":
        store = SQLiteStore(tmp_path / "state.db", clock=clock)
    else:
        store = PostgresStore(request.getfixturevalue("postgres_url"), clock=clock)
    yield store, clock
    store.close()


def test_prune_deletes_an_old_finished_run_with_everything_kept_for_it(
    clocked: tuple[Pruned, _Clock],
) -> None:
    store, clock = clocked
    _run(store, "lead")
    _run(store, "kid", parent="lead")
    dead = store.enqueue_outbox("kid", {"kind": "ping"})
    store.bury_outbox(dead, error="gave up")
    clock.now = NOW - 1 * DAY
    _run(store, "recent")

    report = store.prune(_days(30), now=NOW)

    assert store.get_header("lead") is None and store.get_header("kid") is None
    assert store.get_header("recent") is not None
    assert (report.sessions, report.lineage_edges, report.dead_letters) == (2, 1, 1)
    assert (report.events, report.messages, report.receipts, report.outbox) == (4, 6, 2, 1)
    assert {event.session_id for event in store.events()} == {"recent"}
    assert _rows(store, "messages") == len(store.transcript("recent")) == 3
    assert stored_receipt(store, "start-lead") is None and stored_receipt(store, "start-recent")
    assert store.edges() == [] and store.dead_outbox() == []
    assert _rows(store, "outbox") == 0
    # Nothing left to go: a second pass deletes nothing.
    assert store.prune(_days(30), now=NOW).sessions == 0


def test_prune_keeps_every_run_still_referenced(clocked: tuple[Pruned, _Clock]) -> None:
    store, _ = clocked
    _run(store, "live-lead", status="running")
    _run(store, "done-kid", parent="live-lead")  # its parent may still wait for it
    _run(store, "lead")
    _run(store, "busy-kid", parent="lead", status="running")  # the lead must stay for it
    _run(store, "owed")
    store.enqueue_outbox("owed", {"kind": "ping"})  # a resume of it takes this
    _run(store, "parent")
    _run(store, "unsent", parent="parent")
    store.enqueue_outbox("parent", {"run_id": "unsent", "status": "completed"})
    _run(store, "gone")

    report = store.prune(_days(30), now=NOW)

    kept = {h.session_id for h in store.list_sessions()}
    assert kept == {"live-lead", "done-kid", "lead", "busy-kid", "owed", "parent", "unsent"}
    assert report.sessions == 1 and store.get_header("gone") is None
    assert len(store.transcript("done-kid")) == 3 and stored_receipt(store, "start-owed")


def test_prune_by_status_and_by_count(clocked: tuple[Pruned, _Clock]) -> None:
    store, clock = clocked
    for i, status in enumerate(("completed", "error", "interrupted", "completed")):
        clock.now = OLD + i
        _run(store, f"r{i}", status=status)
    errors_only = Retention(runs_days=MappingProxyType({"error": 30.0}))
    assert store.prune(errors_only, now=NOW).sessions == 1
    assert store.get_header("r1") is None and store.get_header("r0") is not None
    # The newest two finished runs stay, whatever their age.
    assert store.prune(Retention(keep_runs=2), now=NOW).sessions == 1
    assert [h.session_id for h in store.list_sessions()] == ["r2", "r3"]


def test_prune_can_keep_a_lineage_summary(clocked: tuple[Pruned, _Clock]) -> None:
    store, _ = clocked
    _run(store, "lead")
    _run(store, "kid", parent="lead")
    report = store.prune(_days(30, lineage="summary"), now=NOW)
    assert report.sessions == 2 and report.lineage_edges == 0
    header = store.get_header("kid")
    assert header is not None and header.status == "completed" and header.parent_id == "lead"
    assert header.meta == {"pruned": True}
    [edge] = store.edges(parent_id="lead")
    assert edge.child_id == "kid"
    assert store.events(session_id="kid") == [] and store.transcript("kid") == []
    assert store.prune(_days(30, lineage="summary"), now=NOW).sessions == 0


def test_prune_gives_the_space_back_to_the_file_system(tmp_path: Path) -> None:
    clock = _Clock()
    store = SQLiteStore(tmp_path / "state.db", clock=clock)

    def pages() -> tuple[int, int]:
        # The file's pages (its size once the log is checkpointed) and the free ones.
        with store._guard("test") as conn:
            count = conn.execute("PRAGMA page_count").fetchone()[0]
            return int(count), int(conn.execute("PRAGMA freelist_count").fetchone()[0])

    try:
        for i in range(300):
            _run(store, f"run-{i}")
        full, _ = pages()
        report = store.prune(_days(30), now=NOW)
        after, free = pages()
    finally:
        store.close()
    assert report.sessions == 300 and report.freed_bytes > 0
    assert free == 0 and after < full / 2, (full, after)


def test_retention_settings_read_days_by_status_and_refuse_an_unknown_status(
    tmp_path: Path,
) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    (project / ".membrane").mkdir(parents=True)
    home.mkdir()
    config = project / ".membrane" / "config.toml"
    config.write_text('[retention]\nruns_days = 30\nkeep_runs = 1000\nlineage = "summary"\n')
    retention = load_settings(project=project, home=home).retention
    assert dict(retention.runs_days) == dict.fromkeys(EVERY, 30.0)
    assert (retention.keep_runs, retention.lineage, retention.enabled) == (1000, "summary", True)
    config.write_text("[retention]\nruns_days = { error = 7, completed = 1.5 }\n")
    retention = load_settings(project=project, home=home).retention
    assert dict(retention.runs_days) == {"error": 7.0, "completed": 1.5}
    assert not load_settings(project=tmp_path / "none", home=home).retention.enabled
    config.write_text("[retention]\nruns_days = { finished = 7 }\n")
    with pytest.raises(SettingsError) as caught:
        load_settings(project=project, home=home)
    assert "retention.runs_days" in json.dumps(caught.value.to_dict())
