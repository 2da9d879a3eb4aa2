"""The ``Store`` contract of migration 5 (dead letters, leases, workflow state, interrupted
edges), run against ``SQLiteStore`` and ``MemoryStore`` alike."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from store_support import Clock

from membrane.errors import RunLeased, StoreError
from membrane.store import SessionHeader, SQLiteStore, Store
from membrane.store.migrations import MIGRATIONS
from membrane.testing import stored_lease


def _session(store: Store, run_id: str, parent: str | None = None) -> None:
    store.create_session(
        SessionHeader(run_id, "worker", parent, 0 if parent is None else 1, "running")
    )


def test_a_dead_letter_leaves_the_queue_keeps_its_error_and_revives_under_its_id(
    store: Store, clock: Clock
) -> None:
    item = store.enqueue_outbox("parent", {"kind": "ping", "text": "hi"})
    store.mark_attempt(item, next_attempt_at=clock.now + 1)
    store.note_outbox_error(item, "recipient 'parent' is not running here")
    assert store.outbox_error(item) == "recipient 'parent' is not running here"

    dead = store.bury_outbox(item, error="gave up after 1 attempt")

    assert (dead.id, dead.recipient, dead.attempts, dead.last_error) == (
        item,
        "parent",
        1,
        "gave up after 1 attempt",
    )
    assert store.due_outbox(now=clock.now + 100) == []
    assert store.pending_outbox() == []
    assert store.next_outbox_attempt() is None
    assert [d.id for d in store.dead_outbox()] == [item]
    assert store.dead_outbox(recipient="other") == []
    with pytest.raises(StoreError):
        store.bury_outbox(item, error="twice")

    clock.now += 5
    revived = store.revive_outbox(item)

    assert (revived.id, revived.attempts, revived.next_attempt_at) == (item, 0, clock.now)
    assert [i.id for i in store.due_outbox()] == [item]
    assert store.dead_outbox() == []
    with pytest.raises(StoreError, match="no dead letter"):
        store.revive_outbox(item)
    assert store.enqueue_outbox("parent", {"kind": "ping"}) > item


def test_postponing_an_item_counts_no_attempt(store: Store, clock: Clock) -> None:
    item = store.enqueue_outbox("parent", {"kind": "completion"})
    store.postpone_outbox(item, next_attempt_at=clock.now + 30)
    (pending,) = store.pending_outbox()
    assert (pending.attempts, pending.next_attempt_at) == (0, clock.now + 30)
    assert store.due_outbox(now=clock.now + 29) == []


def test_a_dead_owners_leases_are_expired_at_once_and_then_taken_over(
    store: Store, clock: Clock
) -> None:
    store.claim_lease("r1", owner="dead", ttl=60)
    store.claim_lease("r2", owner="dead", ttl=60)
    store.claim_lease("r3", owner="live", ttl=60)
    assert store.lease_owners() == ["dead", "live"]
    assert store.expire_owner_leases("dead") == ["r1", "r2"]
    assert [lease.run_id for lease in store.expired_leases(now=clock.now)] == ["r1", "r2"]
    assert store.claim_lease("r1", owner="new", ttl=60).owner == "new"
    assert store.claim_lease("r3", owner="new", ttl=60).owner == "live"


def test_a_lease_is_held_by_one_owner_until_it_expires_and_is_taken_over(
    store: Store, clock: Clock
) -> None:
    first = store.claim_lease("run", owner="a", ttl=10)
    assert (first.owner, first.expires_at) == ("a", clock.now + 10)

    assert store.claim_lease("run", owner="b", ttl=10).owner == "a"
    assert store.renew_owner_leases("b", ttl=10) == []
    clock.now += 5
    assert store.renew_owner_leases("a", ttl=10) == ["run"]
    renewed = stored_lease(store, "run")
    assert renewed is not None and renewed.expires_at == clock.now + 10
    store.release_lease("run", owner="b")  # not b's: nothing happens
    assert stored_lease(store, "run") == renewed
    assert store.expired_leases() == []

    clock.now += 10
    assert [lease.run_id for lease in store.expired_leases()] == ["run"]
    taken = store.claim_lease("run", owner="b", ttl=10)
    assert (taken.owner, taken.acquired_at) == ("b", clock.now)
    assert store.renew_owner_leases("a", ttl=10) == []
    store.release_lease("run", owner="b")
    assert stored_lease(store, "run") is None


def test_a_stale_holders_fenced_write_is_refused_once_another_owner_took_the_lease(
    store: Store, clock: Clock
) -> None:
    store.create_session(SessionHeader("run", "worker", None, 0, "running"))
    first = store.claim_lease("run", owner="a", ttl=10)
    assert store.claim_lease("run", owner="a", ttl=10).generation == first.generation
    with store.transaction():
        store.fence("run", owner="a", generation=first.generation)
        store.append_messages("run", [{"role": "user", "content": "one"}], start=0)

    clock.now += 11  # a stalled past its lease; b takes the run over
    taken = store.claim_lease("run", owner="b", ttl=10)
    assert (taken.owner, taken.generation) == ("b", first.generation + 1)
    with pytest.raises(RunLeased) as refused, store.transaction():
        store.fence("run", owner="a", generation=first.generation)
        store.append_messages("run", [{"role": "assistant", "content": "late"}], start=1)
    assert refused.value.code == "run-leased"
    assert refused.value.data["owner"] == "b"
    assert store.transcript("run") == [{"role": "user", "content": "one"}]
    store.fence("run", owner="b", generation=taken.generation)  # the holder's own write passes

    # The stale holder's end (its last write drops the lease it no longer holds) is refused
    # whole; the holder's own end drops the lease.
    with pytest.raises(RunLeased), store.transaction():
        store.set_status("run", "stopped")
        store.end_lease("run", owner="a", generation=first.generation)
    header = store.get_header("run")
    assert header is not None and header.status == "running"
    store.end_lease("run", owner="b", generation=taken.generation)
    assert stored_lease(store, "run") is None


def test_workflow_state_is_written_only_at_the_version_read(store: Store) -> None:
    _session(store, "lead")
    assert store.get_workflow("lead") is None
    first = store.put_workflow(
        "lead", workflow="planning", state={"phase": "intake"}, expected_version=0
    )
    assert (first.version, first.state) == (1, {"phase": "intake"})
    with pytest.raises(StoreError, match="version 1, not 0"):
        store.put_workflow("lead", workflow="planning", state={"phase": "x"}, expected_version=0)
    store.put_workflow("lead", workflow="planning", state={"phase": "ready"}, expected_version=1)
    stored = store.get_workflow("lead")
    assert stored is not None and (stored.version, stored.state) == (2, {"phase": "ready"})
    with pytest.raises(StoreError):
        store.put_workflow("ghost", workflow="planning", state={}, expected_version=0)


def test_a_failed_transaction_rolls_back_the_new_tables_too(store: Store) -> None:
    _session(store, "lead")
    with pytest.raises(RuntimeError), store.transaction():
        store.claim_lease("lead", owner="a", ttl=10)
        store.put_workflow("lead", workflow="planning", state={}, expected_version=0)
        raise RuntimeError
    assert stored_lease(store, "lead") is None and store.get_workflow("lead") is None


def test_an_interrupted_edge_reopens_once_its_run_is_resumed(store: Store) -> None:
    _session(store, "child", parent="lead")
    store.record_edge(
        parent_id="lead", child_id="child", child_role="w", brief_digest="d", spawn_fingerprint={}
    )
    store.complete_edge("child", status="interrupted", result_summary="lease expired")
    assert store.edges()[0].status == "interrupted"
    assert store.reopen_edge("child").status == "running"
    with pytest.raises(StoreError, match="not interrupted"):
        store.reopen_edge("child")


def test_a_malformed_stored_edge_is_dropped_on_load_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(tmp_path / "state.db")
    for run_id in ("a", "b"):
        _session(store, run_id, parent="lead")
        store.record_edge(
            parent_id="lead",
            child_id=run_id,
            child_role="w",
            brief_digest="d",
            spawn_fingerprint={},
        )
    store.close()
    conn = sqlite3.connect(tmp_path / "state.db")
    conn.execute("UPDATE lineage_edges SET spawn_fingerprint = 'not json' WHERE child_id = 'a'")
    conn.commit()
    conn.close()

    store = SQLiteStore(tmp_path / "state.db")
    with caplog.at_level(logging.WARNING, logger="membrane.lineage"):
        edges = store.edges()
    store.close()

    assert [edge.child_id for edge in edges] == ["b"]
    assert "malformed lineage edge" in caplog.text


def test_migration_5_keeps_the_edges_an_older_file_held(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    old = SQLiteStore(path, migrations=MIGRATIONS[:4])
    _session(old, "child", parent="lead")
    old.record_edge(
        parent_id="lead",
        child_id="child",
        child_role="w",
        brief_digest="d",
        spawn_fingerprint={"m": 1},
    )
    old.enqueue_outbox("lead", {"kind": "completion"})
    old.close()

    store = SQLiteStore(path)
    try:
        assert store.schema_version == len(MIGRATIONS)
        (edge,) = store.edges()
        assert (edge.child_id, edge.spawn_fingerprint, edge.status) == (
            "child",
            {"m": 1},
            "running",
        )
        store.complete_edge("child", status="interrupted")
        assert len(store.pending_outbox()) == 1
    finally:
        store.close()
