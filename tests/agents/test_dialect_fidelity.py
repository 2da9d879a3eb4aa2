"""Each dialect means what its product means: one test per divergence a user would meet.

Every test places a file in the product's own folder of a temporary project and reads
``membrane explain --json`` (or runs it); where the shared corpus holds a real file with the
field in question, the test copies that file in place too (and skips that part without it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from membrane.cli.app import main

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "agents"
DELEGATION = {"Task", "TaskWait", "TaskList", "TaskStop", "TaskMessage"}


def write(path: Path, frontmatter: str, body: str = "Do the work.") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{frontmatter}\n---\n{body}\n", encoding="utf-8")
    return path


def corpus_file(name: str) -> Path:
    path = CORPUS / name
    if not path.is_file():
        pytest.skip(f"the agent corpus does not hold {name}")
    return path


def place(source: Path, folder: Path, name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / (name or source.name)
    shutil.copyfile(source, target)
    return target


def explain(project: Path, agent: str, capsys: pytest.CaptureFixture[str], *extra: str) -> Any:
    code = main(["explain", agent, "--json", "--project", str(project), *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def callable_tools(report: Any) -> set[str]:
    return set(report["tools"]["callable"])


# --- Claude Code -----------------------------------------------------------------------------


def test_claude_code_agent_in_a_subagents_tools_starts_nothing(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = tmp_path / ".claude" / "agents"
    write(agents / "reviewer.md", "name: reviewer\ntools: Read, Grep, Agent(writer)")
    write(agents / "writer.md", "name: writer\ntools: Read, Write")
    child = explain(tmp_path, "reviewer", capsys)
    assert callable_tools(child) == {"Read", "Grep"}
    assert any("no effect in a subagent" in w["message"] for w in child["warnings"])
    # As the main agent (``claude --agent reviewer``), Agent(writer) lets it start writer.
    top = explain(tmp_path, "reviewer", capsys, "--top-level")
    assert callable_tools(top) >= DELEGATION


def test_claude_code_corpus_lead_with_agent_starts_nothing_as_a_subagent(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = corpus_file("wshobson__agents/plugins__agent-teams__agents__team-lead.md")
    place(source, tmp_path / ".claude" / "agents", "team-lead.md")
    child = explain(tmp_path, "team-lead", capsys)
    assert not DELEGATION & callable_tools(child)
    assert callable_tools(explain(tmp_path, "team-lead", capsys, "--top-level")) >= DELEGATION


def test_claude_code_tools_separated_by_spaces_and_empty_tools_load(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = tmp_path / ".claude" / "agents"
    write(agents / "spaced.md", "name: spaced\ntools: Read Grep")
    write(agents / "empty.md", "name: empty\ntools:")
    assert callable_tools(explain(tmp_path, "spaced", capsys)) == {"Read", "Grep"}
    empty = explain(tmp_path, "empty", capsys)
    # Empty is Claude Code's "left out" (every tool): Membrane's read-only default, said so.
    assert callable_tools(empty) == {"Read", "Glob", "Grep"}
    assert "dialect-default-differs" in {w["code"] for w in empty["warnings"]}


def test_claude_code_edit_and_bash_ask_unless_the_mode_or_a_rule_allows(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        tmp_path / ".claude" / "agents" / "fixer.md",
        "name: fixer\ntools: Read, Edit, Bash, Bash(git log:*)\npermissionMode: default",
    )
    rules = explain(tmp_path, "fixer", capsys)["permissions"]["tools"]
    assert [(r["verdict"], r["pattern"]) for r in rules["Bash"]["rules"]] == [
        ("ask", None),
        ("allow", "git log:*"),
    ]
    assert [r["verdict"] for r in rules["Edit"]["rules"]] == ["ask"]
    assert {r["source"] for r in rules["Edit"]["rules"]} == {"dialect:claude-code"}
    assert "Read" not in rules


SCRIPT = """\
agents:
  toucher:
    - tool_calls:
        - {name: Bash, arguments: {command: "touch out/made.txt"}}
    - text: done
  free:
    - tool_calls:
        - {name: Bash, arguments: {command: "touch out/made.txt"}}
    - text: done
"""


def test_claude_code_permission_mode_default_asks_and_headless_refuses(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = tmp_path / "project"
    write(
        project / ".claude" / "agents" / "toucher.md",
        "name: toucher\ntools: Read, Edit, Bash\npermissionMode: default",
    )
    # No permissionMode: the session's mode decides (Claude Code's --permission-mode sets it).
    write(project / ".claude" / "agents" / "free.md", "name: free\ntools: Read, Write, Bash")
    (project / "out").mkdir()
    script = tmp_path / "script.yaml"
    script.write_text(SCRIPT, encoding="utf-8")
    argv = [sys.executable, "-m", "membrane", "run", "toucher", "touch it", "--json"]
    argv += ["--project", str(project), "--model", f"scripted:{script}"]
    done = subprocess.run(
        argv,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    vetoed = [e["data"]["code"] for e in events if e.get("kind") == "vetoed_call"]
    assert vetoed == ["approval-unavailable"]
    assert not (project / "out" / "made.txt").exists()
    # Claude Code's --permission-mode: bypassPermissions runs what default asks about.
    free = [*argv[:4], "free", *argv[5:]]
    bypass = subprocess.run(
        [*free, "--permission-mode", "bypassPermissions"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ),
    )
    assert bypass.returncode == 0, bypass.stderr
    assert not [line for line in bypass.stdout.splitlines() if '"vetoed_call"' in line]
    assert (project / "out" / "made.txt").exists()
    wrong = subprocess.run(
        [*argv, "--permission-mode", "yolo"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ),
    )
    assert wrong.returncode == 2
    assert json.loads(wrong.stderr)["error"]["code"] == "invalid-request"


def test_claude_code_corpus_file_asks_before_bash_edit_and_write(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "VoltAgent__awesome-claude-code-subagents/categories__01-core-development__"
    place(corpus_file(name + "backend-developer.md"), tmp_path / ".claude" / "agents")
    report = explain(tmp_path, "backend-developer", capsys)
    assert {"Bash", "Edit", "Write"} <= callable_tools(report)
    rules = report["permissions"]["tools"]
    assert {tool: [r["verdict"] for r in rules[tool]["rules"]] for tool in rules} == {
        "Bash": ["ask"],
        "Edit": ["ask"],
        "Write": ["ask"],
    }


# --- OpenCode --------------------------------------------------------------------------------


def test_opencode_tools_fold_write_and_edit_into_one_edit_permission(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = tmp_path / ".opencode" / "agents"
    # OpenCode reads write, edit, patch and multiedit as one `edit` switch: the last key wins.
    write(agents / "a.md", "description: A\ntools:\n  read: true\n  write: true\n  edit: false")
    write(agents / "b.md", "description: B\ntools:\n  edit: false\n  write: true")
    a = explain(tmp_path, "a", capsys)
    assert callable_tools(a) & {"Edit", "Write"} == set()
    assert a["tools"]["left_out"]["Write"] == "disallowed_tools"
    assert {"Edit", "Write"} <= callable_tools(explain(tmp_path, "b", capsys))


def test_opencode_all_tools_with_write_denied_denies_edit_too(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / ".opencode" / "agents" / "a.md", "description: A\ntools:\n  write: false")
    config = tmp_path / ".membrane" / "config.toml"
    config.parent.mkdir()
    config.write_text('opencode_omitted_tools = "all"\n', encoding="utf-8")
    tools = callable_tools(explain(tmp_path, "a", capsys))
    assert {"Read", "Bash"} <= tools
    assert tools & {"Edit", "Write"} == set()


def test_opencode_corpus_edit_deny_leaves_write_out(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "shahboura__agents-opencode/scripts__fixtures__eval-harness__valid__.opencode__agents__"
    place(corpus_file(name + "review.md"), tmp_path / ".opencode" / "agents", "review.md")
    report = explain(tmp_path, "review", capsys)
    assert "Read" in callable_tools(report)
    assert report["tools"]["left_out"]["Write"] == "disallowed_tools"


PERMISSIONS = """description: V2
permissions:
  - {action: shell, resource: "*", effect: ask}
  - {action: shell, resource: "git status *", effect: allow}
  - {action: shell, resource: "git push *", effect: deny}
  - {action: read, resource: "*", effect: allow}
  - {action: read, resource: "*.env", effect: deny}
  - {action: edit, resource: "*", effect: deny}"""


def test_opencode_permissions_list_is_read_in_order_and_unmatched_asks(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / ".opencode" / "agents" / "v2.md", PERMISSIONS)
    report = explain(tmp_path, "v2", capsys)
    assert callable_tools(report) >= {"Bash", "Read"}
    assert callable_tools(report) & {"Edit", "Write"} == set()
    rules = report["permissions"]["tools"]
    assert [(r["pattern"], r["verdict"]) for r in rules["Bash"]["rules"]] == [
        (None, "ask"),
        ("git status *", "allow"),
        ("git push *", "deny"),
    ]
    assert [(r["pattern"], r["verdict"]) for r in rules["Read"]["rules"]] == [
        (None, "allow"),
        ("*.env", "deny"),
    ]
    # Glob is named by no rule: OpenCode asks, so does Membrane.
    assert rules["Glob"]["rules"][-1]["verdict"] == "ask"


def test_opencode_json_agent_with_a_permissions_list(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = [{"action": "edit", "resource": "*", "effect": "deny"}]
    rules += [{"action": "read", "resource": "*", "effect": "allow"}]
    agent = {"description": "R", "prompt": "Review.", "permissions": rules}
    (tmp_path / "opencode.json").write_text(json.dumps({"agent": {"r": agent}}), "utf-8")
    report = explain(tmp_path, "r", capsys)
    assert "Read" in callable_tools(report)
    assert callable_tools(report) & {"Edit", "Write"} == set()
    bash = report["permissions"]["tools"]["Bash"]["rules"]
    assert [(r["pattern"], r["verdict"]) for r in bash] == [(None, "ask")]  # no rule: ask
    assert report["definition"]["fields"]["disallowed_tools"]["key"] == "permissions"


def test_opencode_permissions_list_entry_that_is_not_a_rule_is_refused(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path / ".opencode" / "agents" / "bad.md", "description: B\npermissions:\n  - shell"
    )
    code = main(["agents", "validate", str(path), "--project", str(tmp_path)])
    out = capsys.readouterr()
    assert code != 0
    assert "entry 1 is not an `{action, resource, effect}` rule" in out.out + out.err


# --- pi --------------------------------------------------------------------------------------

EXTENSION = """\
from membrane import Tool


async def _run(arguments, context):
    return "ok"


def setup(ext):
    ext.register_tool(Tool("lint", "beta lint", {"type": "object"}, _run))
"""


def test_pi_exclude_extensions_matches_names_in_any_case(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extension = tmp_path / ".membrane" / "extensions" / "beta.py"
    extension.parent.mkdir(parents=True)
    extension.write_text(EXTENSION, encoding="utf-8")
    agents = tmp_path / ".pi" / "agents"
    write(agents / "kept.md", "description: K\ntools: read\nextensions: true")
    write(agents / "dropped.md", "description: D\ntools: read\nextensions: true\n"
          "exclude_extensions: BETA")  # fmt: skip
    assert "lint" in callable_tools(explain(tmp_path, "kept", capsys))
    assert "lint" not in callable_tools(explain(tmp_path, "dropped", capsys))


def test_pi_spellings_pi_accepts_load_with_pis_meaning(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = tmp_path / ".pi" / "agents"
    write(agents / "bare.md", 'description: B\ntools: ""')
    write(agents / "lead.md", "description: L\ntools: read\nallowed_subagents: true")
    write(agents / "any.md", "description: A\ntools: read\nallowed_subagents: all")
    write(agents / "plain.md", "description: P\ntools: read\nisolation: false")
    write(agents / "flat.md", "description: F\ntools: read\nisolation: none")
    assert callable_tools(explain(tmp_path, "bare", capsys)) == set()  # pi: no built-in tool
    for name in ("lead", "any"):
        report = explain(tmp_path, name, capsys)
        assert report["definition"]["fields"]["allowed_subagents"]["value"] == ["*"]
        assert callable_tools(report) >= DELEGATION
    for name in ("plain", "flat"):
        # No worktree from the file: the call decides, as when the field is left out.
        report = explain(tmp_path, name, capsys, "--call", '{"isolation": "worktree"}')
        assert report["invocation"]["isolation"]["source"] == "call"


def test_pi_corpus_tools_none_and_find_ls(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = "tintinweb__pi-subagents/test__fixtures__.pi__agents__"
    agents = tmp_path / ".pi" / "agents"
    place(corpus_file(prefix + "tools-none.md"), agents, "tools-none.md")
    write(agents / "finder.md", "description: F\ntools: read, find, ls")
    assert not callable_tools(explain(tmp_path, "tools-none", capsys)) & {"Read", "Glob", "Bash"}
    assert callable_tools(explain(tmp_path, "finder", capsys)) == {"Read", "Glob"}


# --- skills: preloaded by Claude Code and pi files -------------------------------------------

SKILL = "---\nname: probe\ndescription: A probe skill.\n---\nSKILL_BODY_MARKER: use the probe.\n"


def test_claude_code_skills_preload_the_skill_and_warn_about_a_missing_one(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skill = tmp_path / ".claude" / "skills" / "probe" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(SKILL, encoding="utf-8")
    agent = write(
        tmp_path / ".claude" / "agents" / "a.md", "name: a\ntools: Read\nskills: probe, ghost"
    )
    report = explain(tmp_path, "a", capsys)
    assert report["tools"]["skills"]["preloaded"] == ["probe"]
    assert (
        "# Preloaded Skill: probe\n\nSKILL_BODY_MARKER: use the probe."
        in report["prompt"]["system"]
    )
    [missing] = [w["message"] for w in report["warnings"] if "ghost" in w["message"]]
    assert missing.startswith(f"{agent}:4: `skills` names 'ghost', which no skill root holds")
    # Membrane's own dialect reads `skills` as the Skill tool's selection only.
    write(tmp_path / ".membrane" / "agents" / "m.md", "name: m\ntools: Read\nskills: probe")
    own = explain(tmp_path, "m", capsys)
    assert own["tools"]["skills"]["preloaded"] == []
    assert "SKILL_BODY_MARKER" not in own["prompt"]["system"]


def test_a_run_carries_the_preloaded_skill_in_its_first_request(
    tmp_path: Path, isolated_home: Path
) -> None:
    import anyio

    from membrane.models.base import ModelRequest, ModelResponse
    from membrane.runtime import SubagentRuntime, SubagentStartRequest
    from membrane.testing import FunctionModel

    prefix = "tintinweb__pi-subagents/test__fixtures__.pi__agents__"
    place(corpus_file(prefix + "skills-preload.md"), tmp_path / ".pi" / "agents", "loader.md")
    skill = tmp_path / ".agents" / "skills" / "probe-skill" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(SKILL.replace("name: probe", "name: probe-skill"), encoding="utf-8")

    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="done")

    async def run() -> list[ModelRequest]:
        model = FunctionModel(answer)
        async with SubagentRuntime.open(tmp_path, model=model) as runtime:
            await runtime.run(SubagentStartRequest(agent_type="loader", task="go"))
        return model.requests

    requests = anyio.run(run)
    assert "Preloaded Skill: probe-skill" in requests[0].system
    assert "SKILL_BODY_MARKER" in requests[0].system


def test_opencode_nested_files_are_named_by_their_path(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = tmp_path / ".opencode" / "agents"
    write(agents / "team" / "reviewer.md", "description: team reviewer")
    write(agents / "other" / "reviewer.md", "description: other reviewer")
    write(agents / "named" / "x.md", "name: chosen\ndescription: named")
    from membrane import Catalog

    catalog = Catalog(project=tmp_path)
    names = {n for n, d in catalog.definitions().items() if not d.builtin}
    assert names == {"team:reviewer", "other:reviewer", "chosen"}
    assert catalog.errors == []
    # OpenCode's spelling dispatches to it.
    assert catalog.dispatch("team/reviewer").definition.description == "team reviewer"
    assert explain(tmp_path, "other/reviewer", capsys)["definition"]["name"] == "other:reviewer"
    # permission.task names it as OpenCode does: the lead may start it.
    write(
        agents / "lead.md",
        'description: lead\npermission:\n  task:\n    "*": deny\n    "team/reviewer": allow',
    )
    lead = explain(tmp_path, "lead", capsys, "--top-level")
    assert lead["definition"]["fields"]["allowed_subagents"]["value"] == ["team:reviewer"]
    assert "- team:reviewer: " in lead["prompt"]["system"]
