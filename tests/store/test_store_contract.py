"""The ``Store`` contract, run against ``SQLiteStore`` and ``MemoryStore`` alike."""

from __future__ import annotations

import hashlib
import math

import pytest
from store_support import Clock

from membrane.errors import InvalidDepth, StoreError
from membrane.limits import MAX_SAFE_INT
from membrane.store import (
    SessionHeader,
    Store,
    brief_digest,
)
from membrane.testing import stored_receipt


def header(session_id: str, *, parent: str | None = None, depth: int = 0) -> SessionHeader:
    return SessionHeader(
        session_id=session_id,
        agent="reviewer",
        parent_id=parent,
        delegation_depth=depth,
        status="running",
    )


# -- sessions ---------------------------------------------------------------------------------


def test_a_created_header_reads_back_with_every_field(store: Store) -> None:
    full = SessionHeader(
        session_id="s1",
        agent="reviewer",
        parent_id="root",
        delegation_depth=2,
        status="running",
        provider="subprocess",
        created_at=5.0,
        request_id="req-1",
        meta={"model": "m", "tools": ("Read", "Grep")},
    )
    store.create_session(full)
    got = store.get_header("s1")
    assert got is not None
    assert got.delegation_depth == 2
    assert (got.agent, got.parent_id, got.provider, got.request_id) == (
        "reviewer",
        "root",
        "subprocess",
        "req-1",
    )
    assert got.created_at == 5.0
    assert got.meta == {"model": "m", "tools": ["Read", "Grep"]}
    assert got.result is None


def test_a_header_without_created_at_is_stamped_by_the_store_clock(
    store: Store, clock: Clock
) -> None:
    store.create_session(header("s1"))
    got = store.get_header("s1")
    assert got is not None and got.created_at == clock.now


def test_an_unknown_session_has_no_header(store: Store) -> None:
    assert store.get_header("nope") is None


def test_a_session_id_can_be_created_only_once(store: Store) -> None:
    store.create_session(header("s1"))
    with pytest.raises(StoreError, match="already exists") as info:
        store.create_session(header("s1", depth=1))
    assert info.value.code == "store-error"
    got = store.get_header("s1")
    assert got is not None and got.delegation_depth == 0


@pytest.mark.parametrize(
    "depth", [-1, True, 1.0, 1.5, math.nan, math.inf, MAX_SAFE_INT + 1, "3", None]
)
def test_a_header_with_a_malformed_depth_is_refused_and_not_written(
    store: Store, depth: object
) -> None:
    bad = SessionHeader("s1", "reviewer", None, depth, "running")  # type: ignore[arg-type]
    with pytest.raises(InvalidDepth) as info:
        store.create_session(bad)
    assert info.value.code == "invalid-depth"
    assert info.value.data["session_id"] == "s1"
    assert store.get_header("s1") is None


def test_the_largest_safe_depth_is_accepted(store: Store) -> None:
    store.create_session(header("s1", depth=MAX_SAFE_INT))
    got = store.get_header("s1")
    assert got is not None and got.delegation_depth == MAX_SAFE_INT


def test_set_status_keeps_the_last_result_given(store: Store) -> None:
    store.create_session(header("s1"))
    store.set_status("s1", "completed", result={"text": "done"})
    store.set_status("s1", "archived")
    got = store.get_header("s1")
    assert got is not None
    assert (got.status, got.result) == ("archived", {"text": "done"})


def test_set_status_on_an_unknown_session_fails(store: Store) -> None:
    with pytest.raises(StoreError, match="no session 'ghost'"):
        store.set_status("ghost", "completed")


def test_list_sessions_returns_all_or_one_parents_children_oldest_first(
    store: Store, clock: Clock
) -> None:
    for session_id, parent in [("root", None), ("b", "root"), ("a", "root"), ("x", "b")]:
        store.create_session(header(session_id, parent=parent))
        clock.now += 1
    assert [h.session_id for h in store.list_sessions()] == ["root", "b", "a", "x"]
    assert [h.session_id for h in store.list_sessions(parent_id="root")] == ["b", "a"]
    assert store.list_sessions(parent_id="a") == []


# -- events -----------------------------------------------------------------------------------


def test_events_get_rising_sequence_numbers_and_filter_by_session_and_after(
    store: Store, clock: Clock
) -> None:
    store.create_session(header("a"))
    store.create_session(header("b"))
    first = store.append_event("a", "published", {"agent": "reviewer"})
    second = store.append_event("b", "turn", {"turn": 1})
    third = store.append_event("a", "completed", {"text": "ok"})
    assert first < second < third
    assert [e.seq for e in store.events()] == [first, second, third]
    assert [e.kind for e in store.events(session_id="a")] == ["published", "completed"]
    assert [e.seq for e in store.events(after=first)] == [second, third]
    event = store.events(session_id="b")[0]
    assert (event.session_id, event.data, event.at) == ("b", {"turn": 1}, clock.now)


def test_an_event_for_an_unknown_session_is_refused(store: Store) -> None:
    with pytest.raises(StoreError, match="no session 'ghost'"):
        store.append_event("ghost", "turn", {})
    assert store.events() == []


def test_event_data_that_json_cannot_carry_is_refused_and_not_written(store: Store) -> None:
    store.create_session(header("a"))
    for data in ({"x": object()}, {"x": math.nan}):
        with pytest.raises(StoreError, match="data of event 'turn' is not JSON-serialisable"):
            store.append_event("a", "turn", data)
    assert store.events() == []


def test_returned_event_data_is_a_copy(store: Store) -> None:
    store.create_session(header("a"))
    store.append_event("a", "turn", {"calls": ["Read"]})
    store.events()[0].data["calls"].append("Bash")  # type: ignore[attr-defined]
    assert store.events()[0].data == {"calls": ["Read"]}


# -- transactions -----------------------------------------------------------------------------


def test_a_transaction_commits_all_its_writes_together(store: Store) -> None:
    with store.transaction():
        store.create_session(header("a"))
        store.append_event("a", "published", {})
    assert store.get_header("a") is not None
    assert len(store.events()) == 1


def test_a_failing_transaction_leaves_nothing_behind(store: Store) -> None:
    with pytest.raises(RuntimeError), store.transaction():
        store.create_session(header("a"))
        store.append_event("a", "published", {})
        raise RuntimeError("setup failed")
    assert store.get_header("a") is None
    assert store.events() == []


def test_a_caught_failure_in_a_nested_transaction_rolls_back_only_the_inner_block(
    store: Store,
) -> None:
    with store.transaction():
        store.create_session(header("a"))
        with pytest.raises(StoreError), store.transaction():
            store.create_session(header("b"))
            store.create_session(header("a"))
        store.append_event("a", "published", {})
    assert [h.session_id for h in store.list_sessions()] == ["a"]
    assert len(store.events()) == 1


def test_completing_a_receipt_and_enqueueing_its_delivery_are_atomic(store: Store) -> None:
    assert store.begin_receipt("req-1", kind="spawn") is None
    with pytest.raises(RuntimeError), store.transaction():
        store.complete_receipt("req-1", {"session_id": "child"})
        store.enqueue_outbox("root", {"kind": "completion"})
        raise RuntimeError("crash before commit")
    receipt = stored_receipt(store, "req-1")
    assert receipt is not None and receipt.status == "pending"
    assert store.due_outbox() == []


# -- receipts ---------------------------------------------------------------------------------


def test_a_repeated_request_id_replays_the_completed_result(store: Store, clock: Clock) -> None:
    assert store.begin_receipt("req-1", kind="spawn") is None
    pending = store.begin_receipt("req-1", kind="spawn")
    assert pending is not None
    assert (pending.status, pending.result, pending.created_at) == ("pending", None, clock.now)
    clock.now += 2
    done = store.complete_receipt("req-1", {"session_id": "child-1"})
    assert (done.status, done.completed_at) == ("completed", clock.now)
    replay = store.begin_receipt("req-1", kind="spawn")
    assert replay is not None
    assert (replay.status, replay.result) == ("completed", {"session_id": "child-1"})


def test_a_receipt_completes_only_once(store: Store) -> None:
    store.begin_receipt("req-1", kind="spawn")
    store.complete_receipt("req-1", {"n": 1})
    with pytest.raises(StoreError, match="already completed"):
        store.complete_receipt("req-1", {"n": 2})
    receipt = stored_receipt(store, "req-1")
    assert receipt is not None and receipt.result == {"n": 1}


def test_completing_an_unknown_receipt_fails(store: Store) -> None:
    with pytest.raises(StoreError, match="no receipt 'ghost'"):
        store.complete_receipt("ghost", {})


def test_a_request_id_reused_for_another_kind_of_action_is_refused(store: Store) -> None:
    store.begin_receipt("req-1", kind="spawn")
    with pytest.raises(StoreError, match="was used for a 'spawn'"):
        store.begin_receipt("req-1", kind="message")


def test_a_released_receipt_lets_the_next_begin_own_the_action(store: Store, clock: Clock) -> None:
    store.begin_receipt("req-1", kind="spawn")
    store.release_receipt("req-1")
    assert stored_receipt(store, "req-1") is None
    clock.now += 5
    assert store.begin_receipt("req-1", kind="spawn") is None
    again = stored_receipt(store, "req-1")
    assert again is not None and (again.status, again.created_at) == ("pending", clock.now)


def test_releasing_a_completed_receipt_fails_and_keeps_it(store: Store) -> None:
    store.begin_receipt("req-1", kind="spawn")
    store.complete_receipt("req-1", {"n": 1})
    with pytest.raises(StoreError, match="is completed, so it cannot be released"):
        store.release_receipt("req-1")
    receipt = stored_receipt(store, "req-1")
    assert receipt is not None and (receipt.status, receipt.result) == ("completed", {"n": 1})


def test_releasing_an_unknown_receipt_changes_nothing(store: Store) -> None:
    store.begin_receipt("other", kind="spawn")
    store.release_receipt("ghost")
    store.release_receipt("ghost")
    assert stored_receipt(store, "ghost") is None
    assert stored_receipt(store, "other") is not None


def test_a_release_inside_a_failed_transaction_is_undone(store: Store) -> None:
    store.begin_receipt("req-1", kind="spawn")
    with pytest.raises(RuntimeError), store.transaction():
        store.release_receipt("req-1")
        raise RuntimeError("roll back")
    receipt = stored_receipt(store, "req-1")
    assert receipt is not None and receipt.status == "pending"


def test_reaping_removes_only_stale_pending_receipts(store: Store, clock: Clock) -> None:
    store.begin_receipt("old-pending", kind="spawn")
    store.begin_receipt("old-done", kind="spawn")
    store.complete_receipt("old-done", {})
    clock.now += 900
    store.begin_receipt("new-pending", kind="spawn")
    assert store.reap_pending_receipts(older_than=clock.now - 1) == ["old-pending"]
    assert stored_receipt(store, "old-pending") is None
    assert stored_receipt(store, "old-done") is not None
    assert stored_receipt(store, "new-pending") is not None


def test_a_receipt_keeps_its_owner_and_a_release_by_owner_spares_another_owners(
    store: Store,
) -> None:
    store.begin_receipt("req-1", kind="spawn", owner="host:1:a:b:2:ns")
    receipt = stored_receipt(store, "req-1")
    assert receipt is not None and receipt.owner == "host:1:a:b:2:ns"
    store.release_receipt("req-1", owner="host:9:other:b:3:ns")  # not its owner: kept
    assert stored_receipt(store, "req-1") is not None
    assert store.pending_receipt_owners() == ["host:1:a:b:2:ns"]
    store.release_receipt("req-1", owner="host:1:a:b:2:ns")
    assert stored_receipt(store, "req-1") is None and store.pending_receipt_owners() == []


def test_reaping_takes_a_dead_owners_receipts_and_spares_a_live_owners(
    store: Store, clock: Clock
) -> None:
    store.begin_receipt("old-live", kind="spawn", owner="live")
    store.begin_receipt("old-unknown", kind="spawn")
    clock.now += 900
    store.begin_receipt("new-dead", kind="spawn", owner="dead")
    store.begin_receipt("new-live", kind="spawn", owner="live")
    reaped = store.reap_pending_receipts(older_than=clock.now - 1, owners=["dead"], spare=["live"])
    assert reaped == ["new-dead", "old-unknown"]
    assert store.pending_receipt_owners() == ["live"]


# -- outbox -----------------------------------------------------------------------------------


def test_outbox_items_are_due_in_order_until_delivered(store: Store, clock: Clock) -> None:
    first = store.enqueue_outbox("root", {"n": 1})
    second = store.enqueue_outbox("root", {"n": 2})
    later = store.enqueue_outbox("root", {"n": 3}, not_before=clock.now + 10)
    assert [i.id for i in store.due_outbox()] == [first, second]
    assert [i.id for i in store.due_outbox(limit=1)] == [first]
    assert [i.id for i in store.due_outbox(now=clock.now + 10)] == [first, second, later]
    store.mark_delivered(first)
    store.mark_delivered(first)  # confirming twice is harmless
    due = store.due_outbox()
    assert [(i.id, i.recipient, i.payload) for i in due] == [(second, "root", {"n": 2})]


def test_a_failed_attempt_counts_and_reschedules_the_item(store: Store, clock: Clock) -> None:
    item_id = store.enqueue_outbox("root", {"n": 1})
    item = store.mark_attempt(item_id, next_attempt_at=clock.now + 5)
    assert (item.attempts, item.next_attempt_at) == (1, clock.now + 5)
    assert store.due_outbox() == []
    again = store.due_outbox(now=clock.now + 5)
    assert [(i.id, i.attempts) for i in again] == [(item_id, 1)]


def test_a_delivered_item_cannot_be_attempted_again(store: Store) -> None:
    item_id = store.enqueue_outbox("root", {})
    store.mark_delivered(item_id)
    with pytest.raises(StoreError, match="already delivered"):
        store.mark_attempt(item_id, next_attempt_at=0.0)


def test_pending_items_are_listed_per_recipient_whenever_they_are_due(
    store: Store, clock: Clock
) -> None:
    assert store.pending_outbox() == [] and store.next_outbox_attempt() is None
    first = store.enqueue_outbox("lead", {"n": 1}, not_before=clock.now + 60)
    other = store.enqueue_outbox("other", {"n": 2}, not_before=clock.now + 30)
    third = store.enqueue_outbox("lead", {"n": 3}, not_before=clock.now + 90)
    assert store.due_outbox() == []
    assert [i.id for i in store.pending_outbox(recipient="lead")] == [first, third]
    assert [i.id for i in store.pending_outbox()] == [first, other, third]
    assert [i.id for i in store.pending_outbox(limit=1)] == [first]
    assert store.next_outbox_attempt() == clock.now + 30
    store.mark_delivered(other)
    assert store.next_outbox_attempt() == clock.now + 60
    store.mark_attempt(first, next_attempt_at=clock.now + 120)
    assert store.next_outbox_attempt() == clock.now + 90
    store.mark_delivered(first)
    store.mark_delivered(third)
    assert store.pending_outbox(recipient="lead") == [] and store.next_outbox_attempt() is None


def test_unknown_outbox_items_and_bad_limits_are_refused(store: Store) -> None:
    with pytest.raises(StoreError, match="no outbox item 7"):
        store.mark_delivered(7)
    with pytest.raises(StoreError, match="no outbox item 7"):
        store.mark_attempt(7, next_attempt_at=0.0)
    with pytest.raises(StoreError, match="at least 1"):
        store.due_outbox(limit=0)
    with pytest.raises(StoreError, match="at least 1"):
        store.pending_outbox(limit=0)


# -- lineage ----------------------------------------------------------------------------------


def test_an_edge_runs_then_completes_with_a_summary(store: Store, clock: Clock) -> None:
    store.create_session(header("child", parent="root", depth=1))
    edge = store.record_edge(
        parent_id="root",
        child_id="child",
        child_role="reviewer",
        brief_digest=brief_digest("review src/"),
        spawn_fingerprint={"provider": "in-process", "model": "m"},
    )
    assert (edge.status, edge.created_at, edge.completed_at) == ("running", clock.now, None)
    clock.now += 3
    done = store.complete_edge("child", status="failed", result_summary="tests fail")
    assert (done.status, done.result_summary, done.completed_at) == (
        "failed",
        "tests fail",
        clock.now,
    )
    assert store.edges(parent_id="root") == [done]
    assert store.edges(parent_id="other") == []
    assert done.spawn_fingerprint == {"provider": "in-process", "model": "m"}


def test_edges_need_a_stored_child_and_are_unique_per_child(store: Store) -> None:
    edge = {
        "parent_id": "root",
        "child_id": "child",
        "child_role": "r",
        "brief_digest": "d",
        "spawn_fingerprint": {},
    }
    with pytest.raises(StoreError, match="no session 'child'"):
        store.record_edge(**edge)  # type: ignore[arg-type]
    store.create_session(header("child", parent="root", depth=1))
    store.record_edge(**edge)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="already has a lineage edge"):
        store.record_edge(**edge)  # type: ignore[arg-type]


def test_an_edge_ends_once_and_only_as_completed_failed_or_interrupted(store: Store) -> None:
    store.create_session(header("child", parent="root", depth=1))
    store.record_edge(
        parent_id="root", child_id="child", child_role="r", brief_digest="d", spawn_fingerprint={}
    )
    with pytest.raises(StoreError, match="'completed', 'failed' or 'interrupted'"):
        store.complete_edge("child", status="running")
    store.complete_edge("child", status="completed")
    with pytest.raises(StoreError, match="already ended as 'completed'"):
        store.complete_edge("child", status="failed")
    with pytest.raises(StoreError, match="no lineage edge 'ghost'"):
        store.complete_edge("ghost", status="completed")


def test_brief_digest_is_the_sha256_of_the_brief() -> None:
    assert brief_digest("review") == hashlib.sha256(b"review").hexdigest()


# -- lifecycle --------------------------------------------------------------------------------


def test_a_closed_store_refuses_every_call(store: Store) -> None:
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get_header("a")
    with pytest.raises(StoreError, match="closed"):
        store.create_session(header("a"))
