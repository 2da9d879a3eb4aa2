"""Every command's ``--json``, validated against its one schema (``cli_schemas``): one document for
a one-shot command, JSON Lines for a stream (``run``, ``resume``), warnings as
``{code, message, file, line}``. Each command really runs, headless, on a real project whose
runs a scripted model made and a real SQLite store holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cli_schemas import (
    ACTION_RESULT,
    ACTIONS,
    AGENT,
    BY_COMMAND,
    DOCTOR,
    EVENT,
    FAILURE,
    INIT,
    LINEAGE,
    MCP_LIST,
    NOTICE,
    OUTBOX,
    REQUEUED,
    RESULT,
    RUNS,
    SCHEDULE,
    SCHEDULE_REMOVED,
    SCHEDULES,
    SERVE,
    SKILLS,
    STARTED,
    WORKFLOW,
)
from cli_support import cli_commands, state_of, wait_gone, write

from membrane.cli.app import main
from membrane.store.sqlite import SQLiteStore

LEAD = "---\nname: lead\ndescription: Leads.\ntools: Read\nallowed_subagents: [worker]\n---\nL.\n"
WORKER = "---\nname: worker\ndescription: Works.\ntools: Read\n---\nWork.\n"
PLANNER = "---\nname: planner\ndescription: Plans.\nworkflow: planning\ntempo: x\n---\nPlan.\n"
SCRIPT = """\
agents:
  lead:
    - tool_calls:
        - {name: Read, arguments: {file_path: notes.txt}}
        - {name: Task, arguments: {agent: worker, task: look}}
    - text: all done
  worker:
    - text: looked
  planner:
    - tool_calls:
        - {name: recordCodebaseIntake, arguments: {summary: s, touches_ui_surface: true}}
    - text: planned
"""
CONFIG = """\
[roles.ops]
allow = ["Read", "Bash"]

[mcp_servers.ghost]
command = "membrane-test-no-such-server"
"""


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "project"
    for name, text in (("lead", LEAD), ("worker", WORKER), ("planner", PLANNER)):
        write(root / ".membrane" / "agents" / f"{name}.md", text)
    write(root / ".membrane" / "config.toml", CONFIG)
    write(root / "notes.txt", "alpha\n")
    write(tmp_path / "script.yaml", SCRIPT)
    write(tmp_path / "failing.yaml", "agents:\n  lead:\n    - {error: the model is down}\n")
    return root


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def document(capsys: pytest.CaptureFixture[str], schema: dict[str, Any], *args: str) -> Any:
    """Run ``membrane args`` (exit 0), check its stdout is one document of ``schema``."""
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    found = json.loads(out)
    jsonschema.validate(found, schema)
    return found


def stream(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    """Run a streaming command (exit 0): each line an event, the last the result."""
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    for line in lines[:-1]:
        jsonschema.validate(line, EVENT)
    jsonschema.validate(lines[-1], RESULT)
    return lines


def model(project: Path) -> str:
    return f"scripted:{project.parent / 'script.yaml'}"


def test_every_command_has_its_schema() -> None:
    assert set(BY_COMMAND) == set(cli_commands()[0])


def test_run_and_resume_stream_events_then_the_result(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--project", str(project), "--json"]
    lines = stream(capsys, "run", "lead", "go", *where, "--model", model(project))
    kinds = [line["kind"] for line in lines]
    assert kinds[0] == "published" and kinds[-1] == "result" and "tool_result" in kinds
    assert {line["agent"] for line in lines[:-1]} == {"lead", "worker"}
    result = lines[-1]
    assert (result["agent"], result["status"], result["text"]) == ("lead", "completed", "all done")
    # Resumed on a model that fails: the run ends in an error, reported on both streams.
    failing = f"scripted:{project.parent / 'failing.yaml'}"
    code, out, err = cli(capsys, "resume", result["run_id"], "again", *where, "--model", failing)
    assert code == 3
    for line in out.splitlines()[:-1]:
        jsonschema.validate(json.loads(line), EVENT)
    last = json.loads(out.splitlines()[-1])
    jsonschema.validate(last, RESULT)
    assert last["run_id"] == result["run_id"] and last["status"] == "error"
    failure = json.loads(err)
    jsonschema.validate(failure, FAILURE)
    assert failure == {"error": last["error"], "exit_code": 3}
    assert failure["error"]["code"] == "model-error"


def test_runs_lineage_outbox_and_workflow_read_the_store(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--project", str(project)]
    # Before any run: empty documents, and no state file is made.
    assert document(capsys, RUNS, "runs", "--json", *where)["runs"] == []
    assert document(capsys, LINEAGE, "lineage", "--json", *where)["roots"] == []
    assert document(capsys, OUTBOX, "outbox", "list", "--json", *where)["items"] == []
    assert not state_of(project).exists()
    lead = stream(capsys, "run", "lead", "go", *where, "--model", model(project), "--json")[-1]
    planner = stream(capsys, "run", "planner", "go", *where, "--model", model(project), "--json")

    runs = document(capsys, RUNS, "runs", "--json", *where)
    assert runs["state"] == str(state_of(project))
    assert [(r["agent"], r["depth"]) for r in runs["runs"]] == [
        ("lead", 0), ("worker", 1), ("planner", 0)
    ]  # fmt: skip
    tree = document(capsys, LINEAGE, "lineage", lead["run_id"], "--json", *where)
    [root] = tree["roots"]
    [child] = root["children"]
    assert (root["agent"], child["agent"], child["edge"]["status"]) == (
        "lead", "worker", "completed"
    )  # fmt: skip

    planned = planner[-1]["run_id"]
    shown = document(capsys, WORKFLOW, "workflow", "show", planned, "--json", *where)
    assert (shown["workflow"], shown["phase"]) == ("planning", "planning")
    # The host's answer prints the state it leads to.
    waived = document(capsys, WORKFLOW, "workflow", "waive", planned, "extras", "--json", *where)
    assert waived["waived_rounds"] == ["extras"] and waived["version"] > shown["version"]

    # A dead letter, listed and requeued.
    store = SQLiteStore(state_of(project))
    try:
        item = store.enqueue_outbox(lead["run_id"], {"kind": "completion"})
        store.bury_outbox(item, error="gone")
    finally:
        store.close()
    dead = document(capsys, OUTBOX, "outbox", "list", "--dead", "--json", *where)
    assert dead["dead"] is True and [i["id"] for i in dead["items"]] == [item]
    assert dead["items"][0]["last_error"] == "gone"
    requeued = document(capsys, REQUEUED, "outbox", "retry", str(item), "--json", *where)
    assert requeued["id"] == item and requeued["attempts"] == 0
    pending = document(capsys, OUTBOX, "outbox", "list", "--json", *where)
    assert pending["dead"] is False and [i["id"] for i in pending["items"]] == [item]


def test_run_background_prints_one_started_document(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "worker", "go", "--background", "--json", "--project", str(project)]
    started = document(capsys, STARTED, *args, "--model", model(project))
    assert started["agent"] == "worker" and started["background"] is True
    assert started["log"] is not None and Path(started["log"]).parent.name == "logs"
    wait_gone(started["pid"])
    lines = [json.loads(line) for line in Path(started["log"]).read_text().splitlines()]
    for line in lines[:-1]:
        jsonschema.validate(line, EVENT)
    jsonschema.validate(lines[-1], RESULT)
    assert lines[-1]["run_id"] == started["run_id"] and lines[-1]["status"] == "completed"


def test_one_shot_project_commands_print_one_document(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--project", str(project)]
    agent = document(capsys, AGENT, "agents", "show", "lead", "--json", *where)
    assert agent["name"] == "lead" and agent["lines"]["tools"] == 4
    [warning] = document(capsys, AGENT, "agents", "show", "planner", "--json", *where)["warnings"]
    assert (warning["code"], Path(warning["file"]).name, warning["line"]) == (
        "unknown-key", "planner.md", 5
    )  # fmt: skip

    headless = ["--headless", "--role", "ops", *where]
    actions = document(capsys, ACTIONS, "actions", "list", "--json", *headless)
    assert [a["name"] for a in actions["actions"]] == ["Bash", "Read"]
    read = ["actions", "run", "Read", "--args", '{"file_path": "notes.txt"}', "--json"]
    assert "alpha" in document(capsys, ACTION_RESULT, *read, *headless)["result"]

    doctor = document(capsys, DOCTOR, "doctor", "--json", *where)
    assert doctor["project"]["root"] == str(project.resolve())
    assert list(doctor["mcp_servers"]) == ["ghost"]

    servers = document(capsys, MCP_LIST, "mcp", "list", "--no-start", "--json", *where)
    assert [(s["name"], s["state"]) for s in servers["servers"]] == [("ghost", "idle")]

    skills = document(capsys, SKILLS, "skills", "list", "--json", *where)
    assert "membrane" in [s["name"] for s in skills["skills"]]


def test_a_broken_skill_is_a_warning_object_in_doctor_and_skills(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / ".claude" / "skills" / "bad" / "SKILL.md", "---\nname: [bad\n---\nBody.\n")
    where = ["--project", str(project)]
    for found in (
        document(capsys, DOCTOR, "doctor", "--json", *where)["skills"]["warnings"],
        document(capsys, SKILLS, "skills", "list", "--json", *where)["warnings"],
    ):
        [warning] = found
        assert warning["file"].endswith("SKILL.md") and warning["code"]
    # A run's stream keeps stdout for events; the warning goes to stderr as a JSON line.
    code, out, err = cli(capsys, "run", "worker", "go", "--json", *where, "--model", model(project))
    assert code == 0
    jsonschema.validate(json.loads(out.splitlines()[-1]), RESULT)
    [line] = [json.loads(line) for line in err.splitlines()]
    jsonschema.validate(line, NOTICE)
    assert line["warning"]["code"] == "skill-problem" and "SKILL.md" in line["warning"]["message"]


def test_init_and_schedule_print_one_document(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    written = document(capsys, INIT, "init", "--json", "--project", str(fresh))
    assert len(written["written"]) == 2 and written["kept"] == []

    where = ["--project", str(project)]
    added = document(capsys, SCHEDULE, "schedule", "add", "lead", "later", "--in", "1h", "--json",
                     *where)  # fmt: skip
    assert (added["agent"], added["kind"]) == ("lead", "in")
    listed = document(capsys, SCHEDULES, "schedule", "list", "--json", *where)
    assert [s["schedule_id"] for s in listed["schedules"]] == [added["schedule_id"]]
    removed = document(
        capsys, SCHEDULE_REMOVED, "schedule", "remove", added["schedule_id"], "--json", *where
    )
    assert removed == {"removed": added["schedule_id"]}
    assert document(capsys, SCHEDULES, "schedule", "list", "--json", *where)["schedules"] == []


def test_mcp_serve_writes_its_warnings_as_json_lines_on_stderr(project: Path) -> None:
    args = ["mcp", "serve", "--role", "ops", "--json", "--project", str(project)]
    done = subprocess.run(
        [sys.executable, "-m", "membrane", *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert lines, done.stderr
    for line in lines:
        jsonschema.validate(line, NOTICE)
    # The role allows no MCP tool, so no server is started: its only notice is about Task.
    assert [line["warning"]["code"] for line in lines] == ["task-not-offered"]
    assert lines[0]["warning"]["file"] == str(project.resolve() / ".membrane" / "config.toml")


def test_serve_announces_its_socket_as_one_json_line(tmp_path: Path, isolated_home: Path) -> None:
    socket = tmp_path / "sock" / "m.sock"
    env = {k: v for k, v in os.environ.items() if k != "MEMBRANE_HEADLESS"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "membrane", "serve", "--socket", str(socket), "--json"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=env,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    announced = json.loads(line)
    jsonschema.validate(announced, SERVE)
    assert announced["listening"] == str(socket.absolute()) and announced["pid"] == proc.pid
