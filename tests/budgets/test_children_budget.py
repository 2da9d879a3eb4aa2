"""``children`` counts starts across the whole subtree, through ``membrane run --budget`` on a
real state file: grandchildren draw on the root's budget, the start past it is refused (an
error tool result in the parent that asked, no child), and nothing else is stopped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from membrane.cli.app import main
from membrane.config.load import membrane_home
from membrane.store import SQLiteStore
from membrane.store.location import locate_state

from .conftest import write_agents

AGENTS = {
    "lead": "allowed_subagents: [manager]\n",
    "manager": "allowed_subagents: [worker]\n",
    "worker": "",
}
#: The lead starts two managers one after the other; each manager starts two workers. That is
#: six starts; a budget of three allows the first manager and both of its workers.
SCRIPT = """\
agents:
  lead:
    - tool_calls: [{name: Task, arguments: {agent: manager, task: first half}}]
    - tool_calls: [{name: Task, arguments: {agent: manager, task: second half}}]
    - text: lead is done
  manager:
    - tool_calls: [{name: Task, arguments: {agent: worker, task: part a}}]
    - tool_calls: [{name: Task, arguments: {agent: worker, task: part b}}]
    - text: manager is done
  worker:
    - text: worker is done
"""


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "project"
    write_agents(root, AGENTS)
    return root


def _lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_children_counts_starts_across_the_subtree(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(SCRIPT, encoding="utf-8")
    args = ["run", "lead", "split the work", "--project", str(project), "--json"]
    code = main([*args, "--model", f"scripted:{script}", "--budget", "children=3"])
    events = _lines(capsys.readouterr().out)
    result = events[-1]
    assert code == 0 and result["kind"] == "result" and result["status"] == "completed"

    store = SQLiteStore(locate_state(project, home=membrane_home()).path)
    try:
        headers = store.list_sessions()
        agents = sorted(header.agent for header in headers)
        # The root and exactly three starts below it, one of them a grandchild's parent.
        assert agents == ["lead", "manager", "worker", "worker"]
        lead = next(h for h in headers if h.agent == "lead")
        assert lead.meta["budget"]["used"]["children"] == 3
        assert lead.meta["budget"]["limit"] == {"children": 3}
    finally:
        store.close()

    published = {e["run_id"]: e for e in events if e["kind"] == "published"}
    assert published[result["run_id"]]["data"]["budget"] == {"children": 3}
    workers = [e for e in published.values() if e["agent"] == "worker"]
    # The second worker saw what was left of the root's budget when it started: nothing.
    assert sorted(e["data"]["budget"]["children"] for e in workers) == [0, 1]
    refused = [
        e
        for e in events
        if e["kind"] == "tool_result" and e["run_id"] == result["run_id"] and e["data"]["is_error"]
    ]
    assert [e["data"]["code"] for e in refused] == ["budget-exceeded"]
    ends = {e["run_id"]: e["data"]["status"] for e in events if e["kind"] == "completed"}
    assert len(ends) == 4 and set(ends.values()) == {"completed"}

    assert main(["runs", "--project", str(project), "--json"]) == 0
    rows = {row["run_id"]: row for row in json.loads(capsys.readouterr().out)["runs"]}
    assert rows[result["run_id"]]["budget"]["limit"] == {"children": 3}
    assert rows[result["run_id"]]["budget"]["used"]["children"] == 3
    assert [row.get("budget") for row in rows.values()].count(None) == 3


def test_explain_shows_the_budget_of_the_definition_and_the_settings(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lead = project / ".membrane" / "agents" / "lead.md"
    lead.write_text(
        lead.read_text(encoding="utf-8").replace(
            "allowed_subagents", "budget: {tokens: 5000, turns: 40}\nallowed_subagents"
        ),
        encoding="utf-8",
    )
    (project / ".membrane" / "config.toml").write_text(
        "[budget]\ntokens = 90000\nchildren = 4\n", encoding="utf-8"
    )
    args = ["explain", "lead", "--project", str(project), "--top-level", "--json"]
    assert main(args) == 0
    budget = json.loads(capsys.readouterr().out)["budget"]
    assert budget == {
        "tokens": {"limit": 5000, "source": "definition"},
        "turns": {"limit": 40, "source": "definition"},
        "children": {"limit": 4, "source": "settings"},
    }


def test_membrane_run_prints_the_budget_in_force_and_refuses_a_bad_one(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(SCRIPT, encoding="utf-8")
    args = ["run", "worker", "part", "--project", str(project), "--model", f"scripted:{script}"]
    assert main([*args, "--budget", "turns=5,tokens=900"]) == 0
    out = capsys.readouterr().out
    assert "budget in force at its start: tokens=900, turns=5" in out
    assert main([*args, "--budget", "turns=five"]) == 2
    err = capsys.readouterr().err
    assert "invalid-request" in err and "turns" in err
