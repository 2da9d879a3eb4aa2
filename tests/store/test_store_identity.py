"""The store knows its own file: ``application_id`` and ``user_version``, a damaged write-ahead
log, and ``PRAGMA quick_check``, on real SQLite files, through the store, ``membrane runs`` and
``membrane doctor``."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from membrane.cli.app import main
from membrane.errors import StoreDamaged, StoreNotMembrane
from membrane.store import SessionHeader, SQLiteStore
from membrane.store.migrations import APPLICATION_ID, MIGRATIONS


def raw(path: Path) -> sqlite3.Connection:
    """A plain connection that bypasses the store, to inspect or damage the file."""
    return sqlite3.connect(path, isolation_level=None)


def fingerprint(path: Path) -> dict[str, bytes]:
    """The bytes of the database and its write-ahead log, to show nothing was written."""
    return {f.name: f.read_bytes() for f in sorted(path.parent.glob(path.name + "*"))}


def killed_writer(path: Path, runs: int) -> None:
    """A process that stores ``runs`` runs and dies without closing: they live in ``-wal``."""
    code = textwrap.dedent(
        f"""
        import os
        from membrane.store import SessionHeader, SQLiteStore
        store = SQLiteStore({str(path)!r}, allow_checkout=True)
        for i in range({runs}):
            store.create_session(SessionHeader(f"run-{{i}}", "lead", None, 0, "completed"))
        os._exit(0)
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_new_store_carries_membranes_application_id_and_its_schema_version(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    SQLiteStore(path).close()
    conn = raw(path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    conn.close()


def test_a_store_written_before_the_ids_is_adopted(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SQLiteStore(path) as store:
        store.create_session(SessionHeader("a", "lead", None, 0, "running"))
    conn = raw(path)
    conn.execute("PRAGMA application_id = 0")
    conn.execute("PRAGMA user_version = 0")
    conn.close()
    with SQLiteStore(path) as store:
        assert [h.session_id for h in store.list_sessions()] == ["a"]
    conn = raw(path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    conn.close()


def test_a_foreign_sqlite_database_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    conn = raw(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.close()
    before = fingerprint(path)
    with pytest.raises(StoreNotMembrane) as info:
        SQLiteStore(path)
    assert info.value.code == "store-not-membrane"
    assert "notes" in info.value.message
    assert fingerprint(path) == before
    conn = raw(path)
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["notes"]
    conn.close()


def test_a_database_of_another_application_id_is_refused_even_when_empty(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = raw(path)
    conn.execute("PRAGMA application_id = 1234")
    conn.close()
    with pytest.raises(StoreNotMembrane):
        SQLiteStore(path)
    conn = raw(path)
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    conn.close()


def test_a_zeroed_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"\0" * 8192)
    with pytest.raises(StoreNotMembrane):
        SQLiteStore(path)
    assert path.read_bytes() == b"\0" * 8192


def test_a_zeroed_wal_header_is_store_damaged_and_no_schema_is_laid_over_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    killed_writer(path, 25)
    wal = path.with_name("state.db-wal")
    with wal.open("r+b") as file:
        file.write(b"\0" * 32)
    before = fingerprint(path)
    for _ in range(2):  # a second open is refused the same way: nothing was written
        with pytest.raises(StoreDamaged) as info:
            SQLiteStore(path)
        assert info.value.code == "store-damaged"
        assert str(wal) in info.value.message
    assert fingerprint(path) == before
    # Moved aside, the log's commits are gone (as the error says) and the file opens again.
    wal.rename(tmp_path / "kept-wal")
    with SQLiteStore(path) as store:
        assert store.list_sessions() == []


def test_a_store_with_its_id_but_no_schema_is_store_damaged(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    SQLiteStore(path).close()
    conn = raw(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreDamaged):
        SQLiteStore(path)


def damaged_index(path: Path) -> None:
    """A store of 300 runs whose ``sessions_by_parent`` index page is overwritten: the runs
    still read, ``PRAGMA quick_check`` fails."""
    with SQLiteStore(path, allow_checkout=True) as store:
        for i in range(300):
            store.create_session(SessionHeader(f"run-{i}", "lead", "p", 0, "completed"))
    conn = raw(path)
    (root,) = conn.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = 'sessions_by_parent'"
    ).fetchone()
    (size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    with path.open("r+b") as file:
        file.seek((root - 1) * size)
        file.write(b"\xa5" * size)


def test_runs_reports_a_zeroed_wal_instead_of_listing_no_runs(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "state.db"
    killed_writer(path, 25)
    with path.with_name("state.db-wal").open("r+b") as file:
        file.write(b"\0" * 32)
    assert main(["runs", "--state", str(path), "--json"]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    assert json.loads(captured.err)["error"]["code"] == "store-damaged"


def test_runs_and_show_report_a_file_that_fails_quick_check(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "state.db"
    damaged_index(path)
    assert main(["runs", "--state", str(path)]) == 3
    captured = capsys.readouterr()
    assert (captured.out, captured.err.split(":", 1)[0]) == ("", "store-damaged")
    assert main(["show", "run-1", "--state", str(path)]) == 3
    assert capsys.readouterr().err.startswith("store-damaged:")


def test_doctor_runs_quick_check_on_the_projects_state(tmp_path: Path, isolated_home: Path) -> None:
    from membrane.store.location import locate_state

    project = tmp_path / "project"
    project.mkdir()
    state = locate_state(project.resolve(), home=isolated_home).path
    env = {**os.environ, "MEMBRANE_HOME": str(isolated_home), "HOME": str(tmp_path / "person")}
    env.pop("MEMBRANE_TOKEN", None)

    def doctor() -> tuple[int, dict[str, object]]:
        done = subprocess.run(
            [sys.executable, "-m", "membrane", "doctor", "--project", str(project), "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        return done.returncode, json.loads(done.stdout)

    state.parent.mkdir(parents=True)
    SQLiteStore(state).close()
    code, doc = doctor()
    assert (code, doc["project"]["state_check"]) == (0, "ok")  # type: ignore[index]
    damaged_index(state)
    code, doc = doctor()
    assert code == 1
    check = doc["project"]["state_check"]  # type: ignore[index]
    assert isinstance(check, list) and any("Page" in line for line in check)
    problems = doc["problems"]
    assert isinstance(problems, list)
    assert any(p["problem"].startswith("store-damaged:") for p in problems)


def test_reopening_an_up_to_date_store_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    SQLiteStore(path).close()
    before = fingerprint(path)
    SQLiteStore(path).close()
    assert fingerprint(path) == before
