"""``membrane skills list`` and the skills part of ``membrane explain``, through the entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membrane.cli import main


def skill(root: Path, name: str, description: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\nBody of {name}.\n", encoding="utf-8"
    )


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    person = tmp_path / "person"
    monkeypatch.setenv("HOME", str(person))
    monkeypatch.delenv("MEMBRANE_AGENT_SKILLS_DIRS", raising=False)
    project = tmp_path / "project"
    skill(project / ".membrane" / "skills", "pdf", "Near pdf.")
    skill(person / ".claude" / "skills", "pdf", "Far pdf.")
    skill(project / ".agents" / "skills", "charts", "Draw charts.")
    (project / ".agents" / "skills" / "broken").mkdir()
    (project / ".agents" / "skills" / "broken" / "SKILL.md").write_text("no frontmatter\n")
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "heir.md").write_text("---\nname: heir\ntools: inherit\nskills: [pdf]\n---\nGo.\n")
    return project


def test_skills_list_json_shows_winners_shadows_roots_and_warnings(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["skills", "list", "--json", "--project", str(project)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    by_name = {s["name"]: s for s in out["skills"]}
    assert set(by_name) == {"pdf", "charts", "membrane"}
    assert by_name["pdf"]["description"] == "Near pdf."
    assert by_name["pdf"]["shadows"] == [str((tmp_path / "person/.claude/skills/pdf").resolve())]
    assert out["roots"][0] == str((project / ".membrane" / "skills").resolve())
    [warning] = out["warnings"]
    assert warning["code"] == "definition-invalid"
    assert warning["file"].endswith("broken/SKILL.md")
    assert set(warning) == {"code", "message", "file", "line"}


def test_explain_says_which_skills_a_child_gets_and_why_others_are_left_out(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["explain", "heir", "--top-level", "--json", "--project", str(project)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert "Skill" in out["tools"]["callable"]
    assert out["tools"]["skills"] == {
        "selected": {"pdf": "Near pdf."},
        "left_out": {"charts": "not selected by skills", "membrane": "not selected by skills"},
        "preloaded": [],
    }
    assert "- pdf: Near pdf." in out["prompt"]["system"]
    assert "charts" not in out["prompt"]["system"]
    code = main(["explain", "heir", "--top-level", "--project", str(project)])
    text = capsys.readouterr().out
    assert "loadable with Skill" in text and "left out: not selected by skills" in text
