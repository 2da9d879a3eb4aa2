"""Usage up the tree: per turn in events and the store, own and subtree totals in the result,
shown by ``membrane run`` (text and --json) and ``membrane runs``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membrane.cli.app import main

LEAD = "---\nname: lead\ndescription: Leads.\ntools: Read\nallowed_subagents: [helper]\n---\nL.\n"
HELPER = "---\nname: helper\ndescription: Helps.\ntools: Read\n---\nH.\n"
SCRIPT = """\
agents:
  lead:
    - tool_calls: [{name: Task, arguments: {agent: helper, task: one}}]
      usage: {input_tokens: 100, output_tokens: 10}
    - tool_calls: [{name: Task, arguments: {agent: helper, task: two}}]
      usage: {input_tokens: 120, output_tokens: 12}
    - text: lead is done
      usage: {input_tokens: 150, output_tokens: 15}
  helper:
    - text: helper is done
      usage: {input_tokens: 7, output_tokens: 3}
"""


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "project"
    (root / ".membrane" / "agents").mkdir(parents=True)
    (root / ".membrane" / "agents" / "lead.md").write_text(LEAD)
    (root / ".membrane" / "agents" / "helper.md").write_text(HELPER)
    (tmp_path / "s.yaml").write_text(SCRIPT)
    return root


def test_usage_is_per_turn_own_and_subtree(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = f"scripted:{project.parent / 's.yaml'}"
    args = ["run", "lead", "go", "--project", str(project), "--model", script]
    assert main([*args, "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    usage = [
        (line["agent"], line["data"]["input_tokens"]) for line in lines if line["kind"] == "usage"
    ]
    assert usage == [("lead", 100), ("helper", 7), ("lead", 120), ("helper", 7), ("lead", 150)]
    result = lines[-1]
    assert result["usage"] == {
        "input_tokens": 370,
        "output_tokens": 37,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    assert (result["usage_total"]["input_tokens"], result["usage_total"]["output_tokens"]) == (
        384,
        43,
    )

    assert main(["runs", "--project", str(project), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["runs"]
    lead = next(row for row in rows if row["agent"] == "lead")
    helpers = [row for row in rows if row["agent"] == "helper"]
    assert lead["usage"]["input_tokens"] == 370
    assert lead["usage_total"]["input_tokens"] == 384
    assert [row["usage_total"]["output_tokens"] for row in helpers] == [3, 3]

    assert main(["runs", "--project", str(project)]) == 0
    table = capsys.readouterr().out
    assert "370/37" in table and "384/43" in table

    assert main(args) == 0
    text = capsys.readouterr().out
    assert "usage: 370 in, 37 out; with its children 384 in, 43 out" in text
