"""Exactly-once truth between the host and the store: a run whose end the store cannot write
(a real SQLite file on a full disk, in its own process) is never reported ``completed``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from membrane.store import SQLiteStore

from .conftest import Project

DRIVER = Path(__file__).parent / "scripts" / "disk_full_driver.py"


def test_a_run_whose_end_cannot_be_stored_is_a_store_error_not_completed(
    project: Project, tmp_path: Path
) -> None:
    project.agent("worker")
    db = tmp_path / "state.db"
    env = {**os.environ, "MEMBRANE_HOME": str(project.home)}
    done = subprocess.run(
        [sys.executable, str(DRIVER), str(db), str(project.root), str(project.home)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    # What the host was told: not `completed`, but the store's failure, by its code.
    assert found.get("status") == "error", found
    assert found["error"]["code"] == "store-error"
    assert found["listed"] == ["error"]
    # What the store holds never says more than the host was told.
    with SQLiteStore(db) as store:
        (header,) = store.list_sessions()
    assert header.status != "completed"
