"""What store operations cost, counted rather than timed: statements per call on a real SQLite
file (through the store's ``trace``) and memory allocated per ``MemoryStore`` transaction."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest

from membrane.errors import StoreError
from membrane.store import MemoryStore, SessionHeader, SQLiteStore
from membrane.testing import stored_lease, stored_receipt


def header(session_id: str) -> SessionHeader:
    return SessionHeader(session_id, "reviewer", None, 0, "running")


def message(i: int) -> dict[str, object]:
    return {"role": "user", "content": f"message {i}"}


def test_an_append_costs_the_same_statements_at_any_transcript_length(tmp_path: Path) -> None:
    statements: list[str] = []
    with SQLiteStore(tmp_path / "state.db", trace=statements.append) as store:
        store.create_session(header("long"))
        store.create_session(header("short"))
        length = 0
        for i in range(0, 3_000, 300):
            length = store.append_messages(
                "long", [message(j) for j in range(i, i + 300)], start=length
            )
        store.append_messages("short", [message(0)], start=0)
        costs = []
        for session, start in (("short", 1), ("long", 3_000)):
            statements.clear()
            store.append_messages(session, [message(start)], start=start)
            costs.append(list(statements))
        assert store.transcript_length("long") == 3_001
    short, long = costs
    assert len(short) == len(long) == 3  # BEGIN, one INSERT (the length check in it), COMMIT
    assert not any(text.startswith("SELECT") for text in short + long)
    assert not any("COUNT(" in text.upper() for text in short + long)


def test_a_multi_message_append_is_one_insert_and_atomic(tmp_path: Path) -> None:
    statements: list[str] = []
    with SQLiteStore(tmp_path / "state.db", trace=statements.append) as store:
        store.create_session(header("s"))
        statements.clear()
        assert store.append_messages("s", [message(i) for i in range(5)], start=0) == 5
        inserts = [text for text in statements if text.startswith("INSERT")]
        assert len(inserts) == 1
        # More rows than one INSERT carries: several INSERTs, all or nothing.
        with pytest.raises(StoreError):
            store.append_messages("s", [message(0)] * 600 + [object()], start=5)  # type: ignore[list-item]
        assert store.transcript_length("s") == 5
        assert store.append_messages("s", [message(i) for i in range(600)], start=5) == 605
        assert len(store.transcript("s")) == 605


def test_writes_inside_a_transaction_take_no_savepoint_of_their_own(tmp_path: Path) -> None:
    statements: list[str] = []
    with SQLiteStore(tmp_path / "state.db", trace=statements.append) as store:
        statements.clear()
        with store.transaction():
            store.create_session(header("a"))
            store.append_event("a", "published", {})
            store.set_status("a", "completed", result={"text": "ok"})
        assert [text.split()[0] for text in statements] == [
            "BEGIN",
            "INSERT",
            "INSERT",
            "UPDATE",
            "COMMIT",
        ]
        # A failing write inside a transaction still leaves the others, as before.
        with store.transaction():
            store.create_session(header("b"))
            with pytest.raises(StoreError):
                store.create_session(header("b"))
            store.append_event("b", "published", {})
        assert [e.kind for e in store.events(session_id="b")] == ["published"]


def _allocated_by_empty_transaction(store: MemoryStore) -> int:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        with store.transaction():
            pass
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


@pytest.mark.costs
def test_a_memory_transaction_copies_nothing_of_the_state() -> None:
    small, large = MemoryStore(), MemoryStore()
    small.create_session(header("only"))
    for i in range(20_000):
        large.create_session(header(f"s{i}"))
        large.append_event(f"s{i}", "published", {"i": i})
    # A copy of 20,000 sessions and events would allocate hundreds of KiB.
    assert _allocated_by_empty_transaction(large) < 4_096
    assert _allocated_by_empty_transaction(large) <= _allocated_by_empty_transaction(small) + 512


def test_a_failed_memory_transaction_undoes_exactly_its_own_changes() -> None:
    store = MemoryStore()
    store.create_session(header("kept"))
    store.append_messages("kept", [message(0)], start=0)
    store.begin_receipt("r1", kind="spawn")
    with pytest.raises(RuntimeError), store.transaction():
        store.create_session(header("gone"))
        store.append_event("kept", "turn", {"turn": 2})
        store.append_messages("kept", [message(1), message(2)], start=1)
        store.complete_receipt("r1", {"ok": True})
        store.enqueue_outbox("kept", {"n": 1})
        with store.transaction():
            store.update_meta("kept", {"changed": True})
        raise RuntimeError("boom")
    assert store.get_header("gone") is None
    assert store.transcript("kept") == [message(0)]
    assert store.events() == []
    receipt = stored_receipt(store, "r1")
    assert receipt is not None and receipt.status == "pending"
    assert store.pending_outbox() == []
    # Sequence numbers rolled back with the writes, as SQLite's do.
    assert store.append_event("kept", "turn", {}) == 1


@pytest.mark.costs
def test_a_live_runs_memory_rows_leave_nothing_for_the_collector_to_follow() -> None:
    """A run's session (with nested ``meta``), its events (with lists and mappings in their
    data) and its lease add no object the garbage collector tracks once it has passed over
    them: counted with ``gc.get_objects()``. What a read returns is still a fresh copy."""
    store = MemoryStore()
    count = 200
    gc.collect()
    before = len(gc.get_objects())
    for i in range(count):
        run = f"run-{i}"
        meta = {"agent_type": "worker", "controls": {"tool_filter": None}, "tags": ["a"]}
        store.create_session(SessionHeader(run, "worker", None, 0, "running", meta=meta))
        store.append_event(run, "published", {"tools": ["Read"], "sandbox": {"writable": []}})
        store.claim_lease(run, owner="me", ttl=60.0)
        store.set_status(run, "running", result={"text": "partial", "items": [1, 2]})
        store.update_meta(run, {"seen": [i]})
    gc.collect()
    assert len(gc.get_objects()) - before < count / 10
    first = store.get_header("run-0")
    assert first is not None and first.meta["controls"] == {"tool_filter": None}
    assert first.meta["seen"] == [0] and first.result == {"text": "partial", "items": [1, 2]}
    first.meta["tags"].append("changed")
    again = store.get_header("run-0")
    assert again is not None and again.meta["tags"] == ["a"]
    [event] = store.events(session_id="run-0")
    assert event.data == {"tools": ["Read"], "sandbox": {"writable": []}}
    lease = stored_lease(store, "run-0")
    assert lease is not None and lease.owner == "me"
