"""``membrane show RUN_ID``: a stored run's tool calls with arguments and results, usage, the
worktree branch and the lineage below it, read from a real store that real runs wrote."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest
from cli_schemas import SHOW

from membrane.cli.app import main

SCRIPT = """\
agents:
  lead:
    - tool_calls:
        - {name: Read, arguments: {file_path: notes.txt}}
        - {name: Nope, arguments: {x: 1}}
        - {name: Task, arguments: {agent: fixer, task: fix it}}
      usage: {input_tokens: 12, output_tokens: 4}
    - text: all done
      usage: {input_tokens: 30, output_tokens: 6}
  fixer:
    - tool_calls:
        - {name: Write, arguments: {file_path: fixed.txt, content: fixed}}
      usage: {input_tokens: 5, output_tokens: 1}
    - text: fixed it
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True)


@pytest.fixture
def ran(tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    project = tmp_path / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "lead.md").write_text(
        "---\nname: lead\ndescription: L.\ntools: Read\nallowed_subagents: [fixer]\n---\nLead.\n"
    )
    (agents / "fixer.md").write_text(
        "---\nname: fixer\ndescription: F.\ntools: Read, Write\nisolation: worktree\n---\nFix.\n"
    )
    (project / "notes.txt").write_text("x" * 1000 + "END")
    _git(project, "init", "-q", "-b", "main")
    _git(project, "-c", "user.email=d@e.x", "-c", "user.name=D", "commit", "-q", "--allow-empty",
         "-m", "start")  # fmt: skip
    script = tmp_path / "script.yaml"
    script.write_text(SCRIPT)
    model = f"scripted:{script}"
    code = main(["run", "lead", "go", "--project", str(project), "--model", model, "--json"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    result = lines[-1]
    fixer = next(e for e in lines if e.get("kind") == "published" and e["agent"] == "fixer")
    return {"project": project, "lead": result["run_id"], "fixer": fixer["run_id"]}


def _show(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["show", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_show_json_has_each_call_with_arguments_result_usage_and_lineage(
    ran: dict,
    capsys: pytest.CaptureFixture[str],  # type: ignore[type-arg]
) -> None:
    code, out, _ = _show(capsys, ran["lead"], "--project", str(ran["project"]), "--json")
    assert code == 0
    report = json.loads(out)
    jsonschema.validate(report, SHOW)
    calls = {c["name"]: c for c in report["tool_calls"]}
    assert calls["Read"]["arguments"] == {"file_path": "notes.txt"}
    assert calls["Read"]["result_truncated"] is True and "END" not in calls["Read"]["result"]
    assert calls["Nope"]["is_error"] is True and calls["Nope"]["code"] == "tool-not-visible"
    assert calls["Task"]["arguments"] == {"agent": "fixer", "task": "fix it"}
    assert report["run"]["usage"]["input_tokens"] == 42
    assert report["run"]["usage_total"]["input_tokens"] == 47
    [child] = report["lineage"]
    assert (child["run_id"], child["agent"]) == (ran["fixer"], "fixer")
    kinds = [e["kind"] for e in report["events"]]
    assert kinds[0] == "published" and kinds[-1] == "completed"
    code, out, _ = _show(capsys, ran["lead"], "--project", str(ran["project"]), "--json", "--full")
    full = {c["name"]: c for c in json.loads(out)["tool_calls"]}
    assert full["Read"]["result"].endswith("END") and not full["Read"]["result_truncated"]


def test_show_names_the_worktree_branch_of_an_isolated_child(
    ran: dict,
    capsys: pytest.CaptureFixture[str],  # type: ignore[type-arg]
) -> None:
    code, out, _ = _show(capsys, ran["fixer"], "--project", str(ran["project"]), "--json")
    worktree = json.loads(out)["run"]["worktree"]
    assert worktree["branch"].startswith("membrane/") and worktree["has_changes"] is True
    code, out, _ = _show(capsys, ran["fixer"], "--project", str(ran["project"]))
    assert code == 0
    assert f"worktree branch {worktree['branch']} (with changes)" in out
    assert 'Write {"file_path": "fixed.txt", "content": "fixed"}' in out


def test_show_an_unknown_run_is_exit_2_with_unknown_run(
    ran: dict,
    capsys: pytest.CaptureFixture[str],  # type: ignore[type-arg]
) -> None:
    code, out, err = _show(capsys, "nope", "--project", str(ran["project"]), "--json")
    assert out == ""
    failure = json.loads(err)
    assert failure["error"]["code"] == "unknown-run" and failure["exit_code"] == code


def test_run_text_names_the_branch_of_a_worktree_child(
    ran: dict,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],  # type: ignore[type-arg]
) -> None:
    model = f"scripted:{tmp_path / 'script.yaml'}"
    code = main(["run", "lead", "again", "--project", str(ran["project"]), "--model", model])
    out = capsys.readouterr().out
    assert code == 0
    fixer = out[out.index("fixer (") :]
    assert "worktree branch membrane/agent-" in fixer and "(with changes)" in fixer
