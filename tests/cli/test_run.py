"""``membrane run``: bad input is a configuration error (exit 2) before anything runs, a failed run
exits 3, ``--json`` is one JSON object per line, and text mode reports every agent of the run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from cli_support import error_code, json_lines, state_of, write

from membrane.cli.app import main
from membrane.config.load import membrane_home
from membrane.store.location import locate_state

LEAD = """\
---
name: lead
description: Hands the task to a helper.
tools: Read
allowed_subagents: [helper, broken]
---
Delegate, then summarise.
"""
HELPER = """\
---
name: helper
description: Reads a file.
tools: Read
---
Read what you are asked to read.
"""
BROKEN = """\
---
name: broken
description: Its model fails.
tools: Read
---
Try.
"""
SCRIPT = """\
agents:
  lead:
    - tool_calls:
        - {name: Task, arguments: {agent: helper, task: Read notes.txt}}
        - {name: Task, arguments: {agent: broken, task: Try anything}}
    - text: lead is done
  helper:
    - tool_calls: [{name: Read, arguments: {file_path: notes.txt}}]
    - text: helper is done
  broken:
    - error: the provider is down
"""


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "project"
    for name, text in (("lead", LEAD), ("helper", HELPER), ("broken", BROKEN)):
        write(root / ".membrane" / "agents" / f"{name}.md", text)
    write(root / "notes.txt", "a note\n")
    return root


@pytest.fixture
def script(tmp_path: Path) -> Path:
    return write(tmp_path / "script.yaml", SCRIPT)


def _sessions(project: Path) -> dict[str, tuple[str, str, str]]:
    """``run_id -> (agent, status, meta)`` from the project's state file."""
    connection = sqlite3.connect(state_of(project))
    try:
        rows = connection.execute("SELECT session_id, agent, status, meta FROM sessions")
        return {run_id: (agent, status, meta) for run_id, agent, status, meta in rows}
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("model", "code"),
    [
        (None, "invalid-request"),
        ("nonsense:x", "unknown-model"),
        ("scripted:", "unknown-model"),
        ("google/gemini-2.5-pro", "unknown-model"),
        ("scripted:missing.yaml", "model-script-invalid"),
    ],
)
def test_a_missing_or_unusable_model_is_a_configuration_error_and_nothing_runs(
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    model: str | None,
    code: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["run", "helper", "Read notes.txt", "--project", str(project)]
    if model is not None:
        args += ["--model", model]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert error_code(captured.err) == code
    assert captured.out == ""
    assert not (state_of(project)).exists()


def test_a_project_that_does_not_exist_is_a_configuration_error(
    tmp_path: Path, script: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-project"
    args = ["run", "helper", "task", "--project", str(missing), "--model", f"scripted:{script}"]
    assert main(args) == 2
    assert error_code(capsys.readouterr().err) == "invalid-request"
    assert not missing.exists()


def test_a_run_whose_model_fails_exits_3_with_an_error_result(
    project: Path, script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "broken", "try", "--project", str(project), "--model", f"scripted:{script}"]
    assert main([*args, "--json"]) == 3
    captured = capsys.readouterr()
    lines = json_lines(captured.out)
    result = lines[-1]
    # stderr holds the run's error as the one error object of every --json command.
    failure = json.loads(captured.err)
    assert failure == {"error": result["error"], "exit_code": 3}
    assert failure["error"]["data"]["run_id"] == result["run_id"]
    assert result["kind"] == "result"
    assert result["agent"] == "broken"
    assert result["status"] == "error"
    assert result["error"]["code"] == "model-error"
    assert [e["kind"] for e in lines if e["run_id"] == result["run_id"]][-2:] == [
        "error",
        "result",
    ]
    assert _sessions(project)[result["run_id"]][:2] == ("broken", "error")


def test_json_mode_streams_every_event_of_the_tree_then_the_result(
    project: Path, script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "lead", "go", "--project", str(project), "--model", f"scripted:{script}"]
    assert main([*args, "--json"]) == 0
    lines = json_lines(capsys.readouterr().out)
    published = {e["agent"]: e for e in lines if e["kind"] == "published"}
    assert set(published) == {"lead", "helper", "broken"}
    sessions = _sessions(project)
    assert {e["run_id"] for e in published.values()} == set(sessions)
    ends = {e["agent"]: e["kind"] for e in lines if e["kind"] in ("completed", "error")}
    assert ends == {"helper": "completed", "broken": "error", "lead": "completed"}
    assert lines[-1]["kind"] == "result"
    assert (lines[-1]["run_id"], lines[-1]["status"]) == (published["lead"]["run_id"], "completed")


def test_background_starts_the_run_in_the_background_and_names_its_run_id(
    project: Path, script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "helper", "read", "--project", str(project), "--model", f"scripted:{script}"]
    assert main([*args, "--background"]) == 0
    out = capsys.readouterr().out
    # The command returns once the run is published; the run goes on in its own process.
    ((run_id, (agent, _status, meta)),) = _sessions(project).items()
    assert agent == "helper"
    assert json.loads(meta)["background"] is True
    assert f"run {run_id} in the background" in out


def test_background_json_marks_the_published_run_as_background(
    project: Path, script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "helper", "read", "--project", str(project), "--model", f"scripted:{script}"]
    assert main([*args, "--background", "--json"]) == 0
    (started,) = json_lines(capsys.readouterr().out)
    assert (started["kind"], started["agent"], started["background"]) == ("started", "helper", True)
    assert started["run_id"] in _sessions(project)
    assert Path(started["log"]).is_file()


def test_text_mode_reports_each_agents_run_id_and_status(
    project: Path, script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "lead", "go", "--project", str(project), "--model", f"scripted:{script}"]
    assert main(args) == 0
    out = capsys.readouterr().out
    sessions = _sessions(project)
    assert sorted(status for _, status, _ in sessions.values()) == [
        "completed",
        "completed",
        "error",
    ]
    for run_id, (agent, status, _) in sessions.items():
        reported = [line for line in out.splitlines() if run_id in line]
        assert reported, f"{agent} ({run_id}) is not in the output"
        assert any(agent in line and status in line for line in reported)


def test_text_mode_says_why_a_child_failed(
    project: Path, script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "lead", "go", "--project", str(project), "--model", f"scripted:{script}"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "model-error" in out
    # The broken child started and failed: the tree says so, not that its start was rejected.
    assert "failed child: child-failed" in out
    assert "rejected start" not in out


def test_json_mode_reports_a_broken_extension_on_stderr_and_keeps_stdout_json(
    project: Path, script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / ".membrane" / "extensions" / "flaky.py", "raise RuntimeError('down')\n")
    args = ["run", "helper", "read", "--project", str(project), "--model", f"scripted:{script}"]
    assert main([*args, "--json"]) == 0
    captured = capsys.readouterr()
    assert json_lines(captured.out)[-1]["status"] == "completed"
    assert "flaky" in captured.err


def test_an_unknown_agent_type_is_refused_before_anything_runs(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The model-facing fallback is for Task calls; a top-level run never guesses its agent.
    script = write(tmp_path / "default.yaml", "default:\n  - text: fallback answer\n")
    args = ["run", "nobody", "go", "--project", str(project), "--model", f"scripted:{script}"]
    assert main(args) == 2
    assert error_code(capsys.readouterr().err) == "unknown-agent"
    assert not locate_state(project.resolve(), home=membrane_home()).path.exists()


def test_an_unknown_agent_type_without_a_fallback_is_a_configuration_error(
    project: Path, script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / ".membrane" / "config.toml", 'fallback_subagent = "none"\n')
    args = ["run", "nobody", "go", "--project", str(project), "--model", f"scripted:{script}"]
    assert main(args) == 2
    assert error_code(capsys.readouterr().err) == "unknown-agent"


def test_a_background_child_stopped_at_exit_is_reported_with_its_real_status(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The lead ends while its background sleeper still waits in a long command; the end of the
    # command stops the sleeper, and the report says so.
    root = tmp_path / "project"
    write(root / ".membrane" / "agents" / "lead.md", LEAD.replace("helper, broken", "sleeper"))
    write(
        root / ".membrane" / "agents" / "sleeper.md",
        "---\nname: sleeper\ndescription: Waits.\ntools: Bash\n---\nWait.\n",
    )
    script = write(
        tmp_path / "bg.yaml",
        "agents:\n  lead:\n    - tool_calls:\n"
        "        - {name: Task, arguments: {agent: sleeper, task: wait, background: true}}\n"
        "    - text: lead is done\n  sleeper:\n"
        "    - tool_calls: [{name: Bash, arguments: {command: sleep 600}}]\n"
        "    - text: sleeper is done\n",
    )
    args = ["run", "lead", "go", "--project", str(root), "--model", f"scripted:{script}"]
    assert main(args) == 0
    out = capsys.readouterr().out
    sessions = _sessions(root)
    (sleeper_id,) = [run_id for run_id, row in sessions.items() if row[0] == "sleeper"]
    assert sessions[sleeper_id][1] == "stopped"
    assert f"sleeper ({sleeper_id}) stopped" in out
    assert "running" not in out, out
