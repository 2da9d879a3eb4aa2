"""``membrane run --background`` returns once the run has started, before it ends, with the run
id; the run goes on in its own process and ``membrane runs`` shows it."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from cli_support import wait_gone

from membrane.store.location import locate_state

LEAD = "---\nname: lead\ndescription: Waits.\ntools: Bash\n---\nWait.\n"


def _status(state: Path, run_id: str) -> str:
    with sqlite3.connect(state) as db:
        [(status,)] = db.execute(
            "SELECT status FROM sessions WHERE session_id = ?", (run_id,)
        ).fetchall()
    return str(status)


def test_background_returns_before_the_run_ends_and_runs_lists_it(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = tmp_path / "project"
    (project / ".membrane" / "agents").mkdir(parents=True)
    (project / ".membrane" / "agents" / "lead.md").write_text(LEAD, encoding="utf-8")
    gate = project / "gate"
    os.mkfifo(gate)
    script = tmp_path / "script.yaml"
    script.write_text(
        "agents:\n  lead:\n"
        "    - tool_calls: [{name: Bash, arguments: {command: 'cat gate'}}]\n"
        "    - text: the gate opened\n",
        encoding="utf-8",
    )
    env = {**os.environ}
    done = subprocess.run(
        [sys.executable, "-m", "membrane", "run", "lead", "wait", "--background", "--json",
         "--project", str(project), "--model", f"scripted:{script}"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    started = json.loads(done.stdout)
    run_id, pid = started["run_id"], started["pid"]
    state = locate_state(project.resolve(), home=isolated_home).path
    # The command has returned; the run is still waiting at the gate.
    assert _status(state, run_id) == "running"
    listed = subprocess.run(
        [sys.executable, "-m", "membrane", "runs", "--json", "--project", str(project)],
        capture_output=True, text=True, env=env, timeout=120, check=True,
    )  # fmt: skip
    assert run_id in listed.stdout
    with open(gate, "w", encoding="utf-8") as opened:
        opened.write("open\n")
    wait_gone(pid)  # the detached process finishes the run
    assert _status(state, run_id) == "completed"
    assert '"kind": "result"' in Path(started["log"]).read_text(encoding="utf-8")
