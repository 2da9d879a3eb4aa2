"""DESIGN rule 9: a project's state lives under ``$MEMBRANE_HOME/projects/<id>/``, outside its
checkout, and a legacy ``<project>/.membrane/state.db`` moves there once, on open, with
everything it held (the write-ahead log included)."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from membrane.cli.app import main
from membrane.errors import StateInsideCheckout
from membrane.store import SessionHeader, SQLiteStore
from membrane.store.location import locate_state, migrate_legacy_state, project_id
from membrane.workspace import Workspace


def _project(root: Path) -> Path:
    (root / ".membrane" / "agents").mkdir(parents=True)
    return root


def _legacy_store_with_an_unchecked_wal(project: Path) -> None:
    """A legacy store whose last commit is still only in its ``-wal`` file."""
    store = SQLiteStore(project / ".membrane" / "state.db", allow_checkout=True)
    store.create_session(SessionHeader("r1", "lead", None, 0, "completed"))
    conn = sqlite3.connect(project / ".membrane" / "state.db")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("UPDATE sessions SET status = 'stopped' WHERE session_id = 'r1'")
    conn.commit()
    # The process "crashes": neither connection checkpoints.
    assert (project / ".membrane" / "state.db-wal").stat().st_size > 0
    conn.close()
    store.close()


def test_project_ids_are_stable_distinct_and_safe_file_names(tmp_path: Path) -> None:
    one, two = tmp_path / "a" / "shop", tmp_path / "b" / "shop"
    one.mkdir(parents=True)
    two.mkdir(parents=True)
    assert project_id(one) == project_id(one / ".." / "shop")
    assert project_id(one) != project_id(two)
    assert project_id(one).startswith("shop-")
    odd = tmp_path / "we ird/../we ird:name"
    odd.mkdir(parents=True)
    assert "/" not in project_id(odd) and ":" not in project_id(odd) and " " not in project_id(odd)


def test_a_legacy_state_file_moves_out_of_the_checkout_once_with_its_wal(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = _project(tmp_path / "project")
    _legacy_store_with_an_unchecked_wal(project)
    ws = Workspace.open(project, home=isolated_home)

    store = ws.open_store()
    try:
        header = store.get_header("r1")
    finally:
        store.close()

    assert header is not None and header.status == "stopped"
    assert ws.state_path.is_file() and not ws.state_path.is_relative_to(project)
    assert sorted(p.name for p in (project / ".membrane").iterdir()) == ["agents"]
    assert migrate_legacy_state(ws.state) is False  # once: nothing left to move


def test_an_existing_new_store_wins_and_the_legacy_file_is_left_alone(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = _project(tmp_path / "project")
    location = locate_state(project, home=isolated_home)
    SQLiteStore(location.path).close()
    _legacy_store_with_an_unchecked_wal(project)

    assert migrate_legacy_state(location) is False
    assert (project / ".membrane" / "state.db").exists()
    store = SQLiteStore(location.path)
    try:
        assert store.get_header("r1") is None
    finally:
        store.close()


def test_membrane_runs_reads_a_legacy_store_after_moving_it(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path / "project")
    _legacy_store_with_an_unchecked_wal(project)

    assert main(["runs", "--project", str(project), "--json"]) == 0

    assert '"run_id": "r1"' in capsys.readouterr().out
    assert not (project / ".membrane" / "state.db").exists()
    assert locate_state(project, home=isolated_home).path.exists()


def test_state_overrides_where_runs_reads(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path / "project")
    elsewhere = tmp_path / "elsewhere.db"
    store = SQLiteStore(elsewhere)
    store.create_session(SessionHeader("r9", "lead", None, 0, "completed"))
    store.close()

    assert main(["runs", "--project", str(project), "--state", str(elsewhere), "--json"]) == 0

    assert '"run_id": "r9"' in capsys.readouterr().out
    assert not locate_state(project, home=isolated_home).path.exists()


def _git_checkout(root: Path) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.mark.parametrize(
    ("where", "folder"),
    [
        ("project/state.db", "project"),
        ("project/.membrane/state.db", "project"),
        ("project/inventory/deep/state.db", "project"),
        ("checkout/state.db", "checkout"),
        ("checkout/.git/state.db", "checkout"),
    ],
)
def test_a_new_store_inside_a_project_or_a_git_checkout_is_refused(
    tmp_path: Path, isolated_home: Path, where: str, folder: str
) -> None:
    _project(tmp_path / "project")
    _git_checkout(tmp_path / "checkout")
    path = tmp_path / where

    with pytest.raises(StateInsideCheckout) as refused:
        SQLiteStore(path)

    assert refused.value.code == "state-inside-checkout"
    assert refused.value.data["folder"] == str((tmp_path / folder).resolve())
    assert not path.exists()


def test_an_existing_store_inside_a_project_still_opens(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = _project(tmp_path / "project")
    SQLiteStore(project / "kept.db", allow_checkout=True).close()

    SQLiteStore(project / "kept.db").close()


def test_a_projects_state_location_is_allowed_even_under_a_home_inside_a_checkout(
    tmp_path: Path, isolated_home: Path
) -> None:
    checkout = _git_checkout(tmp_path / "dotfiles")
    project = _project(tmp_path / "project")
    location = locate_state(project, home=checkout / "membrane-home")

    SQLiteStore(location.path).close()
    SQLiteStore(isolated_home / "elsewhere" / "state.db").close()

    assert location.path.is_file()


def test_membrane_run_refuses_a_state_file_inside_the_project(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path / "project")
    (project / ".membrane" / "agents" / "a.md").write_text("---\nname: a\n---\nDo it.\n")
    script = tmp_path / "script.yaml"
    script.write_text("default:\n  - text: done\n")
    state = project / "state.db"

    model = f"scripted:{script}"
    code = main(
        ["run", "a", "go", "--project", str(project), "--state", str(state), "--model", model]
    )

    assert code == 2
    assert capsys.readouterr().err.startswith("state-inside-checkout:")
    assert not state.exists()
