"""A failing command given ``--json`` writes one ``{error: {code, message, data}, exit_code}``
object on stderr and nothing on stdout: one bad input for every command that takes ``--json``."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from cli_schemas import FAILURE
from cli_support import write

from membrane.cli.app import main

#: (the command line after ``membrane``, the error's code, the exit code). ``{p}`` is the
#: project, ``{bad}`` one whose settings file is not TOML, ``{missing}`` a folder that does not
#: exist.
CASES = [
    (["actions", "list", "--headless", "--role", "nosuch", "--project", "{p}"],
     "invalid-request", 2),
    (["actions", "run", "Read", "--args", "[1]", "--headless", "--project", "{p}"],
     "invalid-request", 2),
    (["agents", "list", "--project", "{bad}"], "settings-invalid", 2),
    (["agents", "show", "lead", "--project", "{missing}"], "invalid-request", 2),
    (["agents", "show", "nosuch", "--project", "{p}"], "unknown-subagent", 2),
    (["agents", "validate", "--project", "{bad}"], "settings-invalid", 2),
    (["doctor", "--project", "{missing}"], "invalid-request", 2),
    (["explain", "lead", "--project", "{bad}"], "settings-invalid", 2),
    (["init", "--project", "{missing}"], "invalid-request", 2),
    (["lineage", "nosuch", "--project", "{p}"], "unknown-run", 3),
    (["mcp", "list", "--no-start", "--project", "{missing}"], "invalid-request", 2),
    (["mcp", "serve", "--project", "{p}"], "invalid-request", 2),
    (["outbox", "list", "--project", "{missing}"], "invalid-request", 2),
    (["outbox", "retry", "7", "--project", "{p}"], "store-error", 3),
    (["resume", "nosuch", "again", "--model", "scripted:{p}/s.yaml", "--project", "{p}"],
     "unknown-run", 3),
    (["run", "nosuch", "go", "--project", "{p}"], "unknown-agent", 2),
    (["runs", "--project", "{missing}"], "invalid-request", 2),
    (["schedule", "add", "lead", "x", "--in", "1h", "--cron", "* * * * *", "--project", "{p}"],
     "invalid-schedule", 2),
    (["schedule", "list", "--project", "{missing}"], "invalid-request", 2),
    (["schedule", "remove", "sch-nosuch", "--project", "{p}"], "unknown-schedule", 2),
    (["serve", "--idle-exit", "0"], "invalid-request", 2),
    (["serve", "--idle-exit", "inf"], "invalid-request", 2),
    (["serve", "--approval-timeout", "nan"], "invalid-request", 2),
    (["show", "nosuch", "--project", "{p}"], "unknown-run", 3),
    (["skills", "list", "--project", "{missing}"], "invalid-request", 2),
    (["workflow", "show", "nosuch", "--project", "{p}"], "store-error", 3),
    (["runs", "--no-such-flag"], "usage-error", 2),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "code", "exit_code"), CASES, ids=lambda v: str(v))
def test_a_bad_input_is_one_error_object_on_stderr(
    argv: list[str],
    code: str,
    exit_code: int,
    tmp_path: Path,
    isolated_home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = tmp_path / "project"
    write(project / ".membrane" / "agents" / "lead.md", "---\nname: lead\n---\nLead.\n")
    write(project / "s.yaml", "agents:\n  lead:\n    - text: hi\n")
    bad = write(tmp_path / "bad" / ".membrane" / "config.toml", "max_depth = [\n").parents[1]
    args = [a.format(p=project, bad=bad, missing=tmp_path / "missing") for a in argv]
    assert main([*args, "--json"]) == exit_code
    captured = capsys.readouterr()
    assert captured.out == ""
    failure = json.loads(captured.err)
    jsonschema.validate(failure, FAILURE)
    assert (failure["error"]["code"], failure["exit_code"]) == (code, exit_code)


def test_an_answer_the_phase_does_not_allow_is_workflow_refused(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    write(
        project / ".membrane" / "agents" / "planner.md",
        "---\nname: planner\ndescription: P.\nworkflow: planning\n---\nPlan.\n",
    )
    write(project / "s.yaml", "agents:\n  planner:\n    - text: planned\n")
    where = ["--project", str(project)]
    assert main(["run", "planner", "go", "--model", f"scripted:{project / 's.yaml'}", *where]) == 0
    capsys.readouterr()
    assert main(["runs", "--json", *where]) == 0
    [run] = json.loads(capsys.readouterr().out)["runs"]
    # The plan is not ready: approving it is refused and changes nothing.
    assert main(["workflow", "approve", run["run_id"], "--json", *where]) == 3
    captured = capsys.readouterr()
    failure = json.loads(captured.err)
    jsonschema.validate(failure, FAILURE)
    assert failure["error"]["code"] == "workflow-refused" and captured.out == ""
