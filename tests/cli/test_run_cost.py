"""Money where users look: each run's own cost and its subtree's in ``membrane runs``, in
``membrane show`` (with each child's share), in the run's result and its events, read from a
real store that real runs wrote; a model with no known price is ``unknown``/``null``, never 0."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from cli_schemas import RESULT, RUNS, SHOW

from membrane.cli.app import main

SCRIPT = """\
agents:
  lead:
    - tool_calls:
        - {name: Task, arguments: {agent: fixer, task: fix it}}
      usage: {input_tokens: 12, output_tokens: 4}
    - text: all done
      usage: {input_tokens: 30, output_tokens: 6}
  fixer:
    - text: fixed it
      usage: {input_tokens: 5, output_tokens: 1}
"""
#: Dollars per million tokens: input 2, output 8.
LEAD_COST = (12 * 2 + 4 * 8 + 30 * 2 + 6 * 8) / 1_000_000
FIXER_COST = (5 * 2 + 1 * 8) / 1_000_000


def _project(tmp_path: Path, *, priced: bool) -> Path:
    project = tmp_path / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "lead.md").write_text(
        "---\nname: lead\ndescription: L.\ntools: Read\nallowed_subagents: [fixer]\n---\nLead.\n"
    )
    (agents / "fixer.md").write_text("---\nname: fixer\ndescription: F.\ntools: Read\n---\nFix.\n")
    script = tmp_path / "script.yaml"
    script.write_text(SCRIPT)
    price = "price = {input = 2.0, output = 8.0}\n" if priced else ""
    (project / ".membrane" / "config.toml").write_text(
        f'default_model = "cheap"\n\n[models.cheap]\nprovider = "scripted"\n'
        f'model = "{script}"\n{price}'
    )
    return project


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:  # type: ignore[type-arg]
    code = main(list(args))
    out = capsys.readouterr().out
    assert code == 0, out
    return [json.loads(line) for line in out.splitlines()]


def test_runs_show_and_the_result_carry_own_and_subtree_cost(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path, priced=True)
    lines = _json(capsys, "run", "lead", "go", "--project", str(project), "--json")
    result = lines[-1]
    jsonschema.validate(result, RESULT)
    assert result["cost"] == pytest.approx(LEAD_COST)
    assert result["cost_total"] == pytest.approx(LEAD_COST + FIXER_COST)
    usage_costs = [e["data"]["cost"] for e in lines[:-1] if e.get("kind") == "usage"]
    assert sorted(usage_costs) == pytest.approx(sorted([56e-6, 108e-6, 18e-6]))

    (runs,) = _json(capsys, "runs", "--project", str(project), "--json")
    jsonschema.validate(runs, RUNS)
    rows = {row["agent"]: row for row in runs["runs"]}
    assert rows["fixer"]["cost"] == pytest.approx(FIXER_COST)
    assert rows["fixer"]["cost_total"] == pytest.approx(FIXER_COST)
    assert rows["lead"]["cost"] == pytest.approx(LEAD_COST)
    assert rows["lead"]["cost_total"] == pytest.approx(LEAD_COST + FIXER_COST)

    (shown,) = _json(capsys, "show", result["run_id"], "--project", str(project), "--json")
    jsonschema.validate(shown, SHOW)
    assert shown["run"]["cost_total"] == pytest.approx(LEAD_COST + FIXER_COST)
    (child,) = shown["children"]
    assert child["agent"] == "fixer" and child["cost"] == pytest.approx(FIXER_COST)
    assert child["usage"]["input_tokens"] == 5

    assert main(["show", result["run_id"], "--project", str(project)]) == 0
    text = capsys.readouterr().out
    assert f"cost: ${LEAD_COST:.6f} (subtree ${LEAD_COST + FIXER_COST:.6f})" in text
    assert "Spending by child" in text and f"${FIXER_COST:.6f}" in text


def test_a_model_with_no_known_price_costs_unknown_never_zero(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path, priced=False)
    lines = _json(capsys, "run", "lead", "go", "--project", str(project), "--json")
    result = lines[-1]
    assert result["cost"] is None and result["cost_total"] is None
    assert all(e["data"]["cost"] is None for e in lines[:-1] if e.get("kind") == "usage")
    (runs,) = _json(capsys, "runs", "--project", str(project), "--json")
    assert {(row["cost"], row["cost_total"]) for row in runs["runs"]} == {(None, None)}
    assert main(["runs", "--project", str(project)]) == 0
    table = capsys.readouterr().out
    assert "unknown/unknown" in table and "$0.000000" not in table
