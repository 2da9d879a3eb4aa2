"""``membrane runs`` lists what a project's store holds (depths, statuses, notices still owed)
without ever creating the store; ``membrane resume`` continues a stored run under its id and
prints it as ``membrane run`` does."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from cli_support import error_code, json_lines, state_of, wait_gone, write

from membrane.cli.app import main
from membrane.store import SessionHeader, SQLiteStore

LEAD = """\
---
name: lead
description: Hands a survey to a worker in the background.
tools: Read
allowed_subagents: [worker]
---
Delegate, then summarise.
"""
WORKER = """\
---
name: worker
description: Surveys the project.
tools: Read
---
Survey what you are asked to survey.
"""
#: The lead starts a background worker and answers at once. With one slot, which the background
#: lead holds, the worker is queued; the lead's end stops it, and its end is owed to the ended
#: lead as a completion notice that nothing delivers until the lead is resumed.
RUN_SCRIPT = """\
agents:
  lead:
    - tool_calls:
        - {name: Task, arguments: {agent: worker, task: survey, background: true}}
    - text: lead is done
  worker:
    - text: survey done
"""
#: A scripted model counts turns per process: the resumed lead replays its list from turn 0.
RESUME_SCRIPT = """\
agents:
  lead:
    - text: the worker was stopped before it ran
"""


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "project"
    write(root / ".membrane" / "agents" / "lead.md", LEAD)
    write(root / ".membrane" / "agents" / "worker.md", WORKER)
    write(root / ".membrane" / "config.toml", "max_concurrency = 1\n")
    return root


def _run_lead(project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Run the lead in the background; return its run id once it has ended."""
    script = write(tmp_path / "run.yaml", RUN_SCRIPT)
    args = ["run", "lead", "go", "--background", "--json"]
    assert main([*args, "--project", str(project), "--model", f"scripted:{script}"]) == 0
    (started,) = json_lines(capsys.readouterr().out)
    # The run goes on in its own process; its JSON lines go to the log it names.
    wait_gone(started["pid"])
    result = json_lines(Path(started["log"]).read_text(encoding="utf-8"))[-1]
    assert (result["kind"], result["status"]) == ("result", "completed")
    return str(result["run_id"])


def _runs(project: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    assert main(["runs", "--project", str(project), "--json"]) == 0
    return {row["run_id"]: row for row in json.loads(capsys.readouterr().out)["runs"]}


def test_runs_lists_each_stored_run_with_its_depth_status_and_owed_notices(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lead_id = _run_lead(project, tmp_path, capsys)
    rows = _runs(project, capsys)
    lead = rows.pop(lead_id)
    ((worker_id, worker),) = rows.items()
    assert worker["parent_id"] == lead_id
    assert (lead["agent"], lead["parent_id"], lead["depth"], lead["status"]) == (
        "lead",
        None,
        0,
        "completed",
    )
    assert (worker["agent"], worker["depth"], worker["status"]) == ("worker", 1, "stopped")
    # The stopped worker's end is owed to the lead, which had ended: one notice is pending.
    assert (lead["pending_notices"], worker["pending_notices"]) == (1, 0)
    assert lead["created_at"] <= worker["created_at"]

    assert main(["runs", "--project", str(project)]) == 0
    table = capsys.readouterr().out
    for run_id, agent, status in ((lead_id, "lead", "completed"), (worker_id, "worker", "stopped")):
        (line,) = [line for line in table.splitlines() if run_id in line and agent in line]
        assert status in line


def test_runs_without_a_state_file_lists_nothing_and_creates_no_file(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = state_of(project)
    assert main(["runs", "--project", str(project)]) == 0
    assert "no runs" in capsys.readouterr().out
    assert main(["runs", "--project", str(project), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"state": str(state), "runs": []}
    assert not state.exists()
    assert sorted(p.name for p in (project / ".membrane").iterdir()) == ["agents", "config.toml"]


def test_runs_of_a_project_that_does_not_exist_is_a_configuration_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    assert main(["runs", "--project", str(missing)]) == 2
    assert error_code(capsys.readouterr().err) == "invalid-request"
    assert not missing.exists()


def test_resume_continues_an_ended_run_which_takes_the_notice_owed_to_it(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lead_id = _run_lead(project, tmp_path, capsys)
    script = write(tmp_path / "resume.yaml", RESUME_SCRIPT)
    args = ["resume", lead_id, "What did the worker find?", "--json"]
    assert main([*args, "--project", str(project), "--model", f"scripted:{script}"]) == 0
    lines = json_lines(capsys.readouterr().out)
    (published,) = [e for e in lines if e["kind"] == "published"]
    assert (published["run_id"], published["agent"]) == (lead_id, "lead")
    assert published["data"]["resumed"] is True
    result = lines[-1]
    assert (result["kind"], result["run_id"], result["status"]) == ("result", lead_id, "completed")
    assert result["text"] == "the worker was stopped before it ran"
    # The resumed lead took the worker's notice: nothing is owed any more.
    rows = _runs(project, capsys)
    assert rows[lead_id]["status"] == "completed"
    assert [row["pending_notices"] for row in rows.values()] == [0, 0]
    store = SQLiteStore(state_of(project))
    try:
        contents = [str(message["content"]) for message in store.transcript(lead_id)]
    finally:
        store.close()
    assert "What did the worker find?" in contents
    (notice,) = [text for text in contents if text.startswith("<task_notification ")]
    assert 'status="stopped"' in notice


def test_resume_in_text_mode_prints_the_run_and_its_tree_as_run_does(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lead_id = _run_lead(project, tmp_path, capsys)
    script = write(tmp_path / "resume.yaml", RESUME_SCRIPT)
    args = ["resume", lead_id, "What did the worker find?", "--project", str(project)]
    assert main([*args, "--model", f"scripted:{script}"]) == 0
    out = capsys.readouterr().out
    assert f"lead ({lead_id}) completed" in out
    assert "the worker was stopped before it ran" in out
    assert "Who spawned whom" in out


def test_resume_of_an_unknown_run_is_unknown_run(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run_lead(project, tmp_path, capsys)
    script = write(tmp_path / "resume.yaml", RESUME_SCRIPT)
    args = ["resume", "no-such-run", "hello", "--project", str(project)]
    assert main([*args, "--model", f"scripted:{script}"]) == 3
    captured = capsys.readouterr()
    assert error_code(captured.err) == "unknown-run"
    assert "no-such-run" in captured.err
    assert captured.out == ""


def test_resume_without_a_state_file_is_unknown_run_and_creates_no_file(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write(tmp_path / "resume.yaml", RESUME_SCRIPT)
    args = ["resume", "abc", "hello", "--project", str(project), "--model", f"scripted:{script}"]
    assert main(args) == 3
    assert error_code(capsys.readouterr().err) == "unknown-run"
    assert not (state_of(project)).exists()


def test_a_corrupt_stored_depth_is_invalid_depth_for_runs_and_resume(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lead_id = _run_lead(project, tmp_path, capsys)
    connection = sqlite3.connect(state_of(project))
    try:
        connection.execute(
            "UPDATE sessions SET delegation_depth = -1 WHERE session_id = ?", (lead_id,)
        )
        connection.commit()
    finally:
        connection.close()
    assert main(["runs", "--project", str(project)]) == 2
    assert error_code(capsys.readouterr().err) == "invalid-depth"
    script = write(tmp_path / "resume.yaml", RESUME_SCRIPT)
    args = ["resume", lead_id, "again", "--project", str(project), "--model", f"scripted:{script}"]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert error_code(captured.err) == "invalid-depth"
    assert captured.out == ""


def test_resume_with_an_empty_message_is_invalid_request(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lead_id = _run_lead(project, tmp_path, capsys)
    script = write(tmp_path / "resume.yaml", RESUME_SCRIPT)
    args = ["resume", lead_id, "  ", "--project", str(project), "--model", f"scripted:{script}"]
    assert main(args) == 2
    assert error_code(capsys.readouterr().err) == "invalid-request"
    assert _runs(project, capsys)[lead_id]["status"] == "completed"


def test_runs_prune_deletes_finished_runs_and_keeps_those_a_notice_still_names(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lead_id = _run_lead(project, tmp_path, capsys)
    state = state_of(project)
    store = SQLiteStore(state)
    try:
        store.create_session(SessionHeader("done", "worker", None, 0, "running"))
        store.append_messages("done", [{"role": "user", "content": "go"}], start=0)
        store.set_status("done", "completed", result={"run_id": "done", "status": "completed"})
    finally:
        store.close()
    where = ["--project", str(project)]
    assert main(["runs", "prune", "--keep", "0", "--json", *where]) == 0
    pruned = json.loads(capsys.readouterr().out)
    assert pruned["state"] == str(state) and pruned["pruned"]["sessions"] == 1
    assert pruned["pruned"]["messages"] == 1
    # The lead is owed the stopped worker's notice, which names the worker: both stay.
    rows = _runs(project, capsys)
    assert lead_id in rows and len(rows) == 2 and "done" not in rows

    assert main(["runs", "prune", "--older-than", "soon", *where]) == 2
    assert error_code(capsys.readouterr().err) == "invalid-request"
    assert main(["runs", "prune", *where]) == 2  # no options and no [retention]
    assert "[retention]" in capsys.readouterr().err
    write(project / ".membrane" / "config.toml", "[retention]\nruns_days = 30\n")
    assert main(["runs", "prune", *where]) == 0
    assert "pruned 0 runs" in capsys.readouterr().out
