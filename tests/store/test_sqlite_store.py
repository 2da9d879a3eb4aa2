"""``SQLiteStore`` on real files: durability, other processes, corruption and migrations."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from membrane.errors import InvalidDepth, StoreError
from membrane.store import SessionHeader, SQLiteStore, brief_digest
from membrane.store.migrations import MIGRATIONS, Migration
from membrane.testing import stored_receipt


def header(session_id: str, *, parent: str | None = None, depth: int = 0) -> SessionHeader:
    return SessionHeader(session_id, "reviewer", parent, depth, "running")


def raw(path: Path) -> sqlite3.Connection:
    """A plain connection that bypasses the store, to inspect or damage the file."""
    return sqlite3.connect(path, isolation_level=None)


def test_the_store_creates_its_folder_and_a_wal_database(tmp_path: Path) -> None:
    path = tmp_path / "state" / "project" / "state.db"
    with SQLiteStore(path) as store:
        store.create_session(header("a"))
    conn = raw(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


@pytest.mark.parametrize("synchronous", ["full", "normal"])
def test_everything_written_survives_close_and_reopen(tmp_path: Path, synchronous: str) -> None:
    path = tmp_path / "state.db"
    with SQLiteStore(path, synchronous=synchronous) as store:  # type: ignore[arg-type]
        store.create_session(header("root"))
        store.create_session(header("child", parent="root", depth=1))
        store.set_status("child", "completed", result={"text": "ok"})
        store.append_event("child", "completed", {"text": "ok"})
        store.begin_receipt("req-1", kind="spawn")
        store.complete_receipt("req-1", {"session_id": "child"})
        store.enqueue_outbox("root", {"kind": "completion"})
        store.record_edge(
            parent_id="root",
            child_id="child",
            child_role="reviewer",
            brief_digest=brief_digest("task"),
            spawn_fingerprint={"provider": "in-process"},
        )
    with SQLiteStore(path) as store:
        child = store.get_header("child")
        assert child is not None
        assert (child.delegation_depth, child.status, child.result) == (
            1,
            "completed",
            {"text": "ok"},
        )
        assert [e.kind for e in store.events(session_id="child")] == ["completed"]
        receipt = stored_receipt(store, "req-1")
        assert receipt is not None and receipt.result == {"session_id": "child"}
        assert [i.payload for i in store.due_outbox()] == [{"kind": "completion"}]
        assert [e.child_id for e in store.edges(parent_id="root")] == ["child"]


WRITER = textwrap.dedent(
    """
    import os, sys
    from membrane.store import SessionHeader, SQLiteStore

    store = SQLiteStore(sys.argv[1])
    store.create_session(SessionHeader("child", "reviewer", "root", 2, "running"))
    store.append_event("child", "published", {"pid": os.getpid()})
    # Exit without close(): a committed write must not depend on a clean shutdown.
    os._exit(0)
    """
)


def test_a_write_committed_by_another_process_is_durable_and_visible(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SQLiteStore(path) as store:
        store.create_session(header("root"))
        subprocess.run([sys.executable, "-c", WRITER, str(path)], check=True, timeout=60)
        child = store.get_header("child")
        assert child is not None and child.delegation_depth == 2
        assert [e.kind for e in store.events(session_id="child")] == ["published"]
    with SQLiteStore(path) as reopened:
        assert [h.session_id for h in reopened.list_sessions(parent_id="root")] == ["child"]


@pytest.mark.parametrize("stored", ["'2'", "'two'", "2.0", "1.5", "-1", "NULL", "9007199254740992"])
def test_a_malformed_stored_depth_is_rejected_on_read_with_the_session_id(
    tmp_path: Path, stored: str
) -> None:
    path = tmp_path / "state.db"
    with SQLiteStore(path) as store:
        store.create_session(header("parent", depth=1))
    conn = raw(path)
    conn.execute(f"UPDATE sessions SET delegation_depth = {stored} WHERE session_id = 'parent'")
    conn.close()
    with SQLiteStore(path) as store:
        with pytest.raises(InvalidDepth) as info:
            store.get_header("parent")
        assert info.value.code == "invalid-depth"
        assert info.value.data["session_id"] == "parent"
        assert "parent" in str(info.value)
        with pytest.raises(InvalidDepth):
            store.list_sessions()


def test_malformed_stored_json_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SQLiteStore(path) as store:
        store.create_session(header("a"))
        store.append_event("a", "turn", {})
    conn = raw(path)
    conn.execute("UPDATE events SET data = '{broken'")
    conn.execute("UPDATE sessions SET meta = '[1]'")
    conn.close()
    with SQLiteStore(path) as store:
        with pytest.raises(StoreError, match="malformed JSON"):
            store.events()
        with pytest.raises(StoreError, match="JSON object"):
            store.get_header("a")


def test_a_file_that_is_not_a_database_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_text("these are not the bytes of a database\n" * 100)
    with pytest.raises(StoreError) as info:
        SQLiteStore(path)
    assert info.value.code == "store-not-membrane"
    assert info.value.data["path"] == str(path)
    assert str(path) in str(info.value)


def test_a_path_that_cannot_hold_a_database_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="cannot create the folder"):
        SQLiteStore(blocker / "state.db")
    with pytest.raises(StoreError, match="cannot open"):
        SQLiteStore(tmp_path)


def test_an_unknown_synchronous_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="'full' or 'normal'"):
        SQLiteStore(tmp_path / "state.db", synchronous="off")  # type: ignore[arg-type]


def test_reopening_applies_no_migration_twice(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    for _ in range(3):
        with SQLiteStore(path) as store:
            assert store.schema_version == len(MIGRATIONS)
    conn = raw(path)
    rows = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
    conn.close()
    assert rows == [(m.version, m.name) for m in MIGRATIONS]


def test_an_old_file_is_upgraded_in_order_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SQLiteStore(path, migrations=MIGRATIONS[:1]) as old:
        assert old.schema_version == 1
        old.create_session(header("a", depth=3))
    with SQLiteStore(path) as new:
        assert new.schema_version == len(MIGRATIONS)
        kept = new.get_header("a")
        assert kept is not None and kept.delegation_depth == 3
        assert new.begin_receipt("req-1", kind="spawn") is None


def test_a_run_stored_as_steered_reads_back_as_wrapped_up(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SQLiteStore(path, migrations=MIGRATIONS[:6]) as old:
        old.create_session(header("late"))
        old.set_status("late", "steered", result={"status": "steered", "text": "done"})
    with SQLiteStore(path) as new:
        kept = new.get_header("late")
        assert kept is not None and kept.status == "wrapped_up"
    conn = raw(path)
    (result,) = conn.execute("SELECT result FROM sessions WHERE session_id = 'late'").fetchone()
    conn.close()
    assert '"wrapped_up"' in result and "steered" not in result


def test_a_file_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    future = (*MIGRATIONS, Migration(len(MIGRATIONS) + 1, "future", ("CREATE TABLE f (x)",)))
    SQLiteStore(path, migrations=future).close()
    with pytest.raises(StoreError, match="newer than this Membrane knows"):
        SQLiteStore(path)


def test_a_failing_migration_leaves_the_schema_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    SQLiteStore(path, migrations=MIGRATIONS[:1]).close()
    broken = (MIGRATIONS[0], Migration(2, "broken", ("CREATE TABLE ok (x)", "NOT SQL")))
    with pytest.raises(StoreError, match="cannot open"):
        SQLiteStore(path, migrations=broken)
    with SQLiteStore(path) as store:
        assert store.schema_version == len(MIGRATIONS)
    conn = raw(path)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert "ok" not in tables


def test_migrations_out_of_order_are_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="expected 1"):
        SQLiteStore(tmp_path / "state.db", migrations=(MIGRATIONS[1],))


def test_writes_from_many_threads_each_get_their_own_sequence_number(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "state.db") as store:
        store.create_session(header("a"))
        seqs: list[int] = []
        lock = threading.Lock()

        def write(worker: int) -> None:
            for n in range(25):
                with store.transaction():
                    seq = store.append_event("a", "turn", {"worker": worker, "n": n})
                with lock:
                    seqs.append(seq)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(seqs) == [e.seq for e in store.events()]
        assert len(set(seqs)) == 100


KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from membrane.store import SessionHeader, SQLiteStore
    store = SQLiteStore(sys.argv[1], synchronous=sys.argv[2])
    for i in range(50):
        store.create_session(SessionHeader(f"s{i}", "worker", None, 0, "running"))
        store.append_event(f"s{i}", "published", {"i": i})
    os.kill(os.getpid(), signal.SIGKILL)  # no close, no checkpoint: the process just dies
    """
)


@pytest.mark.parametrize("synchronous", ["full", "normal"])
def test_every_commit_survives_the_process_being_killed(tmp_path: Path, synchronous: str) -> None:
    path = tmp_path / "state.db"
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(path), synchronous], timeout=60, check=False
    )
    assert done.returncode == -9
    with SQLiteStore(path) as store:
        assert len(store.list_sessions()) == 50
        assert [e.data["i"] for e in store.events()] == list(range(50))


def test_a_store_closed_inside_its_own_transaction_ends_it_with_store_error(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "state.db")
    with pytest.raises(StoreError) as caught, store.transaction():
        store.create_session(SessionHeader("a", "reviewer", None, 0, "running"))
        store.close()
    assert caught.value.code == "store-error"
    with SQLiteStore(tmp_path / "state.db") as again:
        assert again.get_header("a") is None  # nothing of the unfinished transaction stayed
