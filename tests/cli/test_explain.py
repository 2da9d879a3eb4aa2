"""``membrane explain``: the JSON contract, the table, and precise errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from membrane.builtin_tools.declarations import find_browser
from membrane.cli.app import main

ALPHA = """\
from membrane import Tool


async def _run(arguments, context):
    return "ok"


def setup(ext):
    for name in ("search", "write_remote"):
        ext.register_tool(Tool(name, f"alpha {name}", {"type": "object"}, _run))
    ext.add_prompt_section("alpha", "Alpha guidance stays even when its tools are filtered.")
"""
BETA = """\
from membrane import Tool


async def _run(arguments, context):
    return "ok"


def setup(ext):
    ext.register_tool(Tool("lint", "beta lint", {"type": "object"}, _run))
"""
REVIEWER = """\
---
name: reviewer
model: acme/file-model
thinking: high
max_turns: 8
inherit_context: false
run_in_background: false
isolated: false
isolation: off
prompt_mode: append
tools: read, grep, ext:alpha/search
disallowed_tools: grep
extensions: alpha, beta
exclude_extensions: beta
---
Review only the authorization boundary.
"""
LOSER = "---\nname: reviewer\ntools: Bash\nmodel: acme/{root}-model\n---\nThe {root} reviewer.\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    """The seed 003 exercise: three roots define ``reviewer``; the project file wins."""
    root = tmp_path / "project"
    _write(isolated_home / "agents" / "reviewer.md", LOSER.format(root="global"))
    _write(root / ".agents" / "agents" / "reviewer.md", LOSER.format(root="workspace"))
    _write(root / ".membrane" / "agents" / "project.md", REVIEWER)
    _write(root / ".membrane" / "extensions" / "alpha.py", ALPHA)
    _write(root / ".membrane" / "extensions" / "beta.py", BETA)
    # The exercise's file names a model no provider serves; kept as written, the start fails.
    _write(root / ".membrane" / "config.toml", 'max_depth = 2\nunknown_model = "error"\n')
    return root


def test_explain_json_follows_the_contract(project: Path) -> None:
    call = {
        "model": "acme/call-model",
        "thinking": "minimal",
        "max_turns": 2,
        "inherit_context": True,
        "run_in_background": True,
        "isolated": True,
        "isolation": "worktree",
    }
    (project / "parent.json").write_text(
        json.dumps(
            {
                "system_prompt": "You are the lead.",
                "model": "acme/parent-model",
                "permission_mode": "acceptEdits",
                "tools": ["Read", "Grep", {"name": "mcp__docs__find", "origin": "mcp:docs"}],
                "transcript": [{"role": "user", "content": "Audit the login flow."}],
            }
        ),
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "membrane", "explain", "reviewer", "--json",
         "--project", str(project), "--call", json.dumps(call), "--parent", "@parent.json"],
        cwd=project, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert list(out) == [
        "definition", "invocation", "prompt", "extensions", "tools", "checkout", "permissions",
        "warnings", "sandbox", "model", "budget", "role", "authority_digest", "settings",
    ]  # fmt: skip
    sandbox = out["sandbox"]
    assert sandbox["requested"] == "auto"
    assert sandbox["backend"] in ("bubblewrap", "landlock", "guard")
    assert sandbox["backend"] == sandbox["machine"]["strongest"]
    # A reviewer without Write and Edit may write nothing of its checkout.
    assert sandbox["writable"] == [] and sandbox["applies_to"] == []
    definition = out.pop("definition")
    assert definition | {"fields": None} == {
        "name": "reviewer",
        "root": "project",
        "path": str(project / ".membrane" / "agents" / "project.md"),
        "dialect": "membrane",
        "fields": None,
    }
    assert definition["fields"]["thinking"] == {
        "value": "high", "source": "frontmatter", "key": "thinking", "line": 4
    }  # fmt: skip
    out = {"definition": definition, **out}
    assert out["invocation"] == {
        "model": {"value": "acme/file-model", "source": "frontmatter"},
        "thinking": {"value": "high", "source": "frontmatter"},
        "max_turns": {"value": 8, "source": "frontmatter"},
        "inherit_context": {"value": False, "source": "frontmatter"},
        "run_in_background": {"value": False, "source": "frontmatter"},
        "isolated": {"value": False, "source": "frontmatter"},
        "isolation": {"value": "off", "source": "frontmatter"},
        "permission": {"value": "acceptEdits", "source": "parent"},
        "tool_choice": {"value": None, "source": "default"},
    }
    assert list(out["prompt"]) == ["mode", "system", "task_prefix"]
    assert out["prompt"]["mode"] == "append"
    assert out["prompt"]["task_prefix"] == ""
    system = out["prompt"]["system"]
    assert system.startswith("You are the lead.\n\n# Subagent\n")
    assert f"Your working folder is {project}" in system
    assert "Alpha guidance stays even when its tools are filtered." in system
    assert system.endswith(
        "<agent_instructions>\nReview only the authorization boundary.\n</agent_instructions>"
    )
    assert out["extensions"] == {"loaded": ["alpha"], "excluded": ["beta"]}
    browser = {"BrowserPreview": "not selected"} if find_browser() is not None else {}
    assert out["tools"] == {
        "callable": ["Read", "search"],
        "left_out": {
            "Bash": "not selected",
            **browser,
            "Edit": "not selected",
            "Glob": "not selected",
            "Grep": "disallowed_tools",
            "Skill": "not selected",
            "Write": "not selected",
            "lint": "extension excluded",
            "mcp__docs__find": "extension not loaded",
            "write_remote": "not selected",
        },
        "skills": {
            "selected": None,
            "left_out": {"membrane": "Skill is not callable"},
            "preloaded": [],
        },
        "servers": {"mcp__docs__find": "docs"},
    }
    assert out["checkout"] == {
        "kind": "main",
        "path": str(project),
        "read_roots": [],
        "read_roots_left_out": {},
    }
    # `acme/file-model` names no provider, alias or [models] entry: a start would refuse it.
    assert out["model"]["spec"] == "acme/file-model"
    assert out["model"]["source"] == "frontmatter"
    assert out["model"]["error"]["code"] == "unknown-model"
    assert len(out["warnings"]) == 1
    assert out["warnings"][0]["code"] == "unknown-model"
    assert out["warnings"][0]["message"].endswith("the start will fail with unknown-model")


def test_explain_prints_a_readable_table(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "reviewer", "--project", str(project)])
    assert code == 0
    text = capsys.readouterr().out
    for heading in ("Invocation", "Tools", "Composition", "System prompt"):
        assert heading in text
    assert "left out: extension excluded" in text
    assert "acme/file-model" in text


def test_explain_turns_a_fallback_into_a_warning(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "Reviewer", "--project", str(project), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["definition"]["name"] == "reviewer"
    assert any("matched `reviewer`" in w["message"] for w in out["warnings"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--call", "{bad"], "invalid-request: --call: invalid JSON at line 1 column 2"),
        (["--call", "[1]"], "invalid-request: --call: expected a JSON object"),
        (["--call", '{"turns": 3}'], "invalid-request: --call: unknown call parameter 'turns'"),
        (["--call", "@missing.json"], "invalid-request: --call: cannot read missing.json"),
        (["--parent", '{"depth": "two"}'], "invalid-depth: --parent.depth: expected a non-neg"),
        (["--parent", '{"depth": 99999999999999999999999}'], "invalid-depth: --parent.depth"),
        (["--parent", '{"depth": 9007199254740992}'], "invalid-depth: --parent.depth"),
        (["--parent", '{"depth": true}'], "invalid-depth: --parent.depth: expected a non-neg"),
        (["--parent", '{"depth": 1.0}'], "invalid-depth: --parent.depth: expected a non-neg"),
        (["--parent", '{"depth": -1}'], "invalid-depth: --parent.depth: expected a non-neg"),
        (["--parent", '{"depth": 9007199254740991}'], "invalid-depth: parent.depth + 1 must"),
        (["--call", '{"max_turns": 9007199254740992}'], "invalid-request: --call.max_turns"),
        (["--top-level", "--parent", '{"depth": 0}'], "invalid-request: --parent.depth cannot"),
        (["--project", "missing"], "invalid-request: --project: "),
        (["--workspace", "missing"], "invalid-request: --workspace: "),
        (["--project", ".membrane/config.toml"], "invalid-request: --project: "),
        (["--parent", '{"tools": [{"nme": "x"}]}'], "invalid-request: --parent.tools[0]"),
    ],
)
def test_bad_input_fails_with_a_precise_config_error(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(project)
    assert main(["explain", "reviewer", *args]) == 2
    assert " ".join(capsys.readouterr().err.split()).startswith(message)


def test_a_missing_project_names_the_path_instead_of_falling_back(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nonexistent"
    assert main(["explain", "worker", "--project", str(missing)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"invalid-request: --project: {missing} does not exist" in err


@pytest.mark.parametrize("agent", ["", "  "])
def test_an_empty_agent_type_is_rejected(
    project: Path, capsys: pytest.CaptureFixture[str], agent: str
) -> None:
    assert main(["explain", agent, "--project", str(project)]) == 2
    assert "invalid-request: AGENT is empty" in capsys.readouterr().err


def test_the_workspace_option_adds_its_definitions(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "elsewhere"
    _write(workspace / ".agents" / "agents" / "porter.md", "---\nname: porter\ntools: Bash\n---\n")
    assert main(["explain", "porter", "--project", str(project), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["definition"]["name"] == "general-purpose"
    args = ["explain", "porter", "--project", str(project), "--workspace", str(workspace)]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["definition"]["root"] == "workspace"
    assert "Bash" in out["tools"]["callable"]


def test_a_worktree_checkout_is_where_the_manager_puts_it(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    project = repo / "services" / "api"
    project.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    call = ["--call", '{"isolation": "worktree"}', "--json"]
    assert main(["explain", "worker", "--project", str(project), *call]) == 0
    out = json.loads(capsys.readouterr().out)
    root = project.resolve() / ".membrane" / "worktrees"
    expected = f"{root}/<run-id>/services/api"
    assert out["checkout"]["kind"] == "worktree" and out["checkout"]["path"] == expected
    assert f"Working folder: {expected}" in out["prompt"]["system"]
    top = tmp_path / "top"
    top.mkdir()
    assert main(["explain", "worker", "--project", str(top), *call]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["checkout"]["path"] == f"{top.resolve()}/.membrane/worktrees/<run-id>"
    assert any(
        w["code"] == "worktree-unavailable" and "is not inside a Git work tree" in w["message"]
        for w in out["warnings"]
    )


def test_explain_help_says_extensions_are_imported_and_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "runs its setup()" in text
    assert "--top-level" in text
    assert "--workspace" in text


def test_explain_fails_closed_for_an_unknown_agent_when_the_policy_says_none(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / ".membrane" / "config.toml").write_text('fallback_subagent = "none"\n')
    assert main(["explain", "nobody", "--project", str(project)]) == 2
    assert "unknown-subagent" in capsys.readouterr().err


def test_the_example_workspace_resolves_as_the_demo_expects(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = Path(__file__).resolve().parents[2] / "examples" / "workspace"
    results = {}
    for agent in ("scout", "auditor"):
        assert main(["explain", agent, "--project", str(workspace), "--json"]) == 0
        results[agent] = json.loads(capsys.readouterr().out)
    scout, auditor = results["scout"], results["auditor"]
    # scout omits tools and extensions: the read-only default and nothing else (DESIGN rule 2).
    assert scout["tools"]["callable"] == ["Glob", "Grep", "Read"]
    assert scout["tools"]["left_out"]["annotate"] == "not asked for"
    assert "You cannot change files" in scout["prompt"]["system"]
    assert auditor["extensions"]["loaded"] == ["metrics", "notes"]
    assert auditor["tools"]["callable"] == [
        "Grep", "Read", "Task", "TaskList", "TaskMessage", "TaskStop", "TaskWait", "summarize"
    ]  # fmt: skip
    assert auditor["tools"]["left_out"]["annotate"] == "not selected"
    assert any(
        w["code"] == "depth-at-cap" and "every start it attempts is rejected" in w["message"]
        for w in auditor["warnings"]
    )
    assert "Notes: when a finding takes more than three sentences" in auditor["prompt"]["system"]


def test_the_example_lead_is_a_top_level_agent_below_the_cap(
    isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = Path(__file__).resolve().parents[2] / "examples" / "workspace"
    assert main(["explain", "lead", "--project", str(workspace), "--top-level", "--json"]) == 0
    lead = json.loads(capsys.readouterr().out)
    assert "- Delegation depth: 0 of at most 1" in lead["prompt"]["system"]
    assert "Task" in lead["tools"]["callable"]
    assert not any("every start it attempts is rejected" in w["message"] for w in lead["warnings"])
    assert main(["explain", "lead", "--project", str(workspace), "--json"]) == 0
    as_child = json.loads(capsys.readouterr().out)
    assert "- Delegation depth: 1 of at most 1" in as_child["prompt"]["system"]
