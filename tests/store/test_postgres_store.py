"""What ``PostgresStore`` guarantees between several nodes on one database (two stores on one
schema of the private cluster stand for two nodes), by the database's own means."""

from __future__ import annotations

import threading

import psycopg
import pytest

from membrane.errors import StoreError, StoreNotMembrane
from membrane.lowlevel import PostgresStore, SessionHeader


def test_a_drainer_skips_the_items_another_node_holds_locked(postgres_url: str) -> None:
    with PostgresStore(postgres_url) as one, PostgresStore(postgres_url) as other:
        first = one.enqueue_outbox("lead", {"kind": "ping"})
        second = one.enqueue_outbox("lead", {"kind": "ping"})
        with one.transaction():
            assert [item.id for item in one.due_outbox(limit=1)] == [first]
            # Held by the first node's open transaction: skipped, not waited for.
            assert [item.id for item in other.due_outbox()] == [second]
        assert [item.id for item in other.due_outbox()] == [first, second]


def test_two_nodes_charging_one_ledger_add_up_exactly(postgres_url: str) -> None:
    charges = 40
    with PostgresStore(postgres_url) as setup:
        setup.create_session(SessionHeader("lead", "lead", None, 0, "running"))
        setup.write_ledger("lead", {"used": {"turns": 0}})
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def charge() -> None:
        try:
            with PostgresStore(postgres_url) as node:
                start.wait()
                for _ in range(charges):
                    with node.transaction():
                        ledger = node.lock_ledger("lead")
                        assert ledger is not None
                        node.write_ledger("lead", {"used": {"turns": ledger["used"]["turns"] + 1}})
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=charge) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    with PostgresStore(postgres_url) as check:
        assert check.lock_ledger("lead") == {"used": {"turns": 2 * charges}}


def test_two_nodes_claiming_one_lease_leave_exactly_one_holder(postgres_url: str) -> None:
    with PostgresStore(postgres_url) as one, PostgresStore(postgres_url) as other:
        held = {one.claim_lease("run", owner="a", ttl=30).owner}
        held.add(other.claim_lease("run", owner="b", ttl=30).owner)
        assert held == {"a"}


def test_another_applications_sessions_table_is_refused_and_left_alone(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE sessions (id integer)")
    with pytest.raises(StoreNotMembrane) as refused:
        PostgresStore(postgres_url)
    assert refused.value.code == "store-not-membrane"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass('membrane_schema') IS NULL").fetchone()
    assert row == (True,)


def test_a_schema_newer_than_this_membrane_is_refused(postgres_url: str) -> None:
    PostgresStore(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO membrane_schema VALUES (99, 'future', 0)")
    with pytest.raises(StoreError, match="newer than this Membrane"):
        PostgresStore(postgres_url)
