"""Real Claude Code, OpenCode and pi files under their native roots, checked through explain.

The corpus stays outside the project: each test copies the files it needs into a temporary
project's native roots (``.claude/agents``, ``.opencode/agents``, ``.pi/agents``) and checks,
file by file, that what ``explain --json`` reports is what the file says in its own product's
terms. The expected values are computed here from the raw frontmatter, independently of the
dialect code. Without the corpus these tests skip.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from membrane.agents.catalog import Catalog
from membrane.agents.fields import KNOWN_KEYS, plain
from membrane.agents.frontmatter import load_yaml, split_frontmatter
from membrane.builtin_tools.declarations import find_browser
from membrane.cli.app import main
from membrane.resolve import CallParams, ParentContext, resolve
from membrane.resolve.warnings import warning_objects
from membrane.workspace import Workspace

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "agents"

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="the agent corpus is not present")

BUILTINS = {"read": "Read", "glob": "Glob", "grep": "Grep", "bash": "Bash"}
BUILTINS |= {"edit": "Edit", "write": "Write"}


def _claude_files() -> list[Path]:
    dirs = ("VoltAgent__awesome-claude-code-subagents", "wshobson__agents")
    files = [f for d in dirs for f in sorted((CORPUS / d).glob("*.md"))]
    return files + sorted((CORPUS / "Fidasek009__agents").glob(".claude__agents__*.md"))


def _opencode_files() -> list[Path]:
    return sorted((CORPUS / "shahboura__agents-opencode").glob("*.md"))


def _pi_files() -> list[Path]:
    return sorted((CORPUS / "tintinweb__pi-subagents").glob("*.md"))


def _raw(file: Path) -> dict[str, Any]:
    """The frontmatter as YAML reads it (with the layout repairs), before any dialect."""
    fm = split_frontmatter(file.read_text(encoding="utf-8"), path=str(file))
    data, _ = load_yaml(fm, known_keys=KNOWN_KEYS)
    return {str(k): plain(v) for k, v in data.items()}


def _install(files: list[Path], folder: Path) -> dict[Path, Path]:
    """Each corpus file copied under ``folder``, one subfolder per corpus source."""
    placed = {}
    for file in files:
        target = folder / file.parent.name / file.name.split("__")[-1]
        if target.exists():
            target = target.with_name(file.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)
        placed[target] = file
    return placed


def _explained(project: Path) -> tuple[Catalog, dict[str, dict[str, Any]]]:
    """``explain --json`` of every winning definition, computed the way the command does."""
    ws = Workspace.open(project)
    parent = ParentContext(tools=dict(ws.registry.tools()), cwd=str(project))
    out = {}
    for name, definition in ws.catalog.definitions().items():
        if definition.builtin:
            continue
        authority = resolve(definition, CallParams(), parent, ws.deployment())
        warnings = warning_objects(authority.warnings, definition.warnings, file=definition.path)
        out[name] = {**authority.to_json(), "warnings": warnings}
    return ws.catalog, out


def _tokens(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v).strip() for v in value]
    return [t.strip() for t in str(value).split(",") if t.strip()]


def _by_path(explained: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {data["definition"]["path"]: data for data in explained.values()}


def test_claude_code_files_map_each_field_in_explain(tmp_path: Path, isolated_home: Path) -> None:
    placed = _install(_claude_files(), tmp_path / ".claude" / "agents")
    catalog, explained = _explained(tmp_path)
    assert catalog.errors == []
    by_path = _by_path(explained)
    checked = 0
    for target, source in placed.items():
        data = by_path.get(str(target))
        if data is None:
            continue  # shadowed by an earlier file with the same name (duplicate-name)
        checked += 1
        raw = _raw(source)
        definition, fields = data["definition"], data["definition"]["fields"]
        assert (definition["dialect"], definition["root"]) == ("claude-code", "claude-code-project")
        assert fields["description"]["source"] == "dialect:claude-code", source
        callable_tools = set(data["tools"]["callable"])
        model = raw.get("model")
        if model == "inherit":
            assert data["invocation"]["model"]["source"] == "parent"
        elif model is not None:
            # Claude Code's names and provider/model ids are served; any other name (``fable``)
            # runs on the run's default model, with a model-fallback warning.
            served = model.lower() in ("sonnet", "opus", "haiku") or model.startswith(
                ("anthropic/", "openai/")
            )
            codes = [w["code"] for w in data["warnings"]]
            if served:
                wanted = {"value": model, "source": "dialect:claude-code"}
                assert data["invocation"]["model"] == wanted
                assert "model-fallback" not in codes, source
            else:
                assert data["invocation"]["model"] == {"value": None, "source": "deployment"}
                assert "model-fallback" in codes, source
        if isinstance(raw.get("hooks"), dict):
            # Claude Code's command hooks run for this agent: explain lists each one.
            wanted_hooks = [
                ("SubagentStop" if event == "Stop" else event, hook["command"].strip())
                for event, groups in raw["hooks"].items()
                if event
                in ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop")
                for group in groups
                for hook in group["hooks"]
                if hook.get("type", "command") == "command"
            ]
            listed = [(h["event"], h["command"]) for h in fields["hooks"]["value"]]
            assert listed == wanted_hooks and fields["hooks"]["source"] == "dialect:claude-code"
        unsupported = [w for w in data["warnings"] if w["code"] == "dialect-unsupported"]
        assert not any("Claude Code hooks" in w["message"] for w in unsupported), source
        if "tools" not in raw:
            assert callable_tools == {"Read", "Glob", "Grep"}, source
            assert any(w["code"] == "dialect-default-differs" for w in data["warnings"]), source
            continue
        tokens = _tokens(raw["tools"])
        wanted = {BUILTINS[t.lower()] for t in tokens if t.lower() in BUILTINS}
        wanted |= {"Edit" for t in tokens if t.lower() == "multiedit"}
        # Exactly the built-ins the file names: nothing more, nothing dropped.
        assert {t for t in callable_tools if t in BUILTINS.values()} == wanted, source
        assert fields["tools"]["source"] == "dialect:claude-code"
        if any(t in ("Agent", "Task") for t in tokens):
            assert fields["allowed_subagents"] == {
                "value": ["*"], "source": "dialect:claude-code", "key": "tools",
                "line": fields["tools"]["line"],
            }  # fmt: skip
        delegation = {"Task", "TaskWait", "TaskList", "TaskStop"}
        if "allowed_subagents" not in fields:
            delegation = set()
        for token in tokens:
            if token.lower() not in BUILTINS and not token.startswith("mcp__"):
                assert token in delegation or token not in callable_tools, source
        if "color" in raw:
            assert fields["color"]["value"] == raw["color"]
    assert checked >= 250


def _last(table: Mapping[str, Any], name: str) -> Any:
    found = None
    for pattern, verdict in table.items():
        if fnmatch.fnmatchcase(name, pattern):
            found = verdict
    return found


def test_opencode_files_map_mode_steps_and_permissions_in_explain(
    tmp_path: Path, isolated_home: Path
) -> None:
    placed = _install(_opencode_files(), tmp_path / ".opencode" / "agents")
    catalog, explained = _explained(tmp_path)
    assert catalog.errors == []
    by_path = _by_path(explained)
    checked = 0
    for target, source in placed.items():
        data = by_path.get(str(target))
        if data is None:
            continue
        checked += 1
        raw = _raw(source)
        fields = data["definition"]["fields"]
        assert data["definition"]["dialect"] == "opencode"
        assert fields["mode"] == {
            "value": raw["mode"], "source": "dialect:opencode", "key": "mode",
            "line": fields["mode"]["line"],
        }  # fmt: skip
        if "steps" in raw:
            assert fields["max_turns"]["key"] == "steps"
            assert data["invocation"]["max_turns"] == {
                "value": raw["steps"],
                "source": "dialect:opencode",
            }
        permission = raw["permission"]
        rules = data["permissions"]["tools"]
        for key in ("read", "grep", "glob", "bash", "edit"):
            builtin = BUILTINS.get(key, "Edit")
            verdict = _last(permission, key)
            if verdict == "allow":
                assert builtin in data["tools"]["callable"], (source, builtin)
                assert builtin not in rules or rules[builtin]["default"] == "allow"
            elif verdict == "ask" or isinstance(verdict, dict):
                # `ask` and pattern maps are rules enforced on every call, in the map's order.
                assert builtin in data["tools"]["callable"], (source, builtin)
                table = {"*": verdict} if isinstance(verdict, str) else verdict
                assert [(r["pattern"], r["verdict"]) for r in rules[builtin]["rules"]] == [
                    (None if p == "*" else p, v) for p, v in table.items()
                ], (source, builtin)
                assert rules[builtin]["default"] == "ask"
                assert all(r["source"].startswith("permission") for r in rules[builtin]["rules"])
            else:
                assert builtin not in data["tools"]["callable"], (source, builtin)
            if verdict == "deny" and key in permission:
                assert data["tools"]["left_out"][builtin] == "disallowed_tools"
        task = permission.get("task")
        if isinstance(task, dict) and task.get("*") == "deny":
            allowed = [n for n, v in task.items() if n != "*" and v == "allow"]
            assert fields["allowed_subagents"]["value"] == allowed
            assert fields["allowed_subagents"]["source"] == "dialect:opencode"
        if "temperature" in raw:
            assert any(
                w["code"] == "dialect-unsupported" and "temperature" in w["message"]
                for w in data["warnings"]
            )
    assert checked >= 5


def test_pi_files_map_tool_names_and_native_fields_in_explain(
    tmp_path: Path, isolated_home: Path
) -> None:
    placed = _install(_pi_files(), tmp_path / ".pi" / "agents")
    catalog, explained = _explained(tmp_path)
    assert catalog.errors == []
    by_path = _by_path(explained)
    pi_names = BUILTINS | {"find": "Glob", "ls": "Glob"}
    checked = 0
    for target, source in placed.items():
        data = by_path.get(str(target))
        if data is None:
            continue
        checked += 1
        raw = _raw(source)
        assert data["definition"]["dialect"] == "pi"
        callable_tools = set(data["tools"]["callable"])
        for key in ("model", "thinking", "max_turns"):
            if key in raw:
                assert data["invocation"][key] == {"value": raw[key], "source": "dialect:pi"}
        if "tools" not in raw:
            assert any(w["code"] == "dialect-default-differs" for w in data["warnings"]), source
            continue
        tokens = [t.lower() for t in _tokens(raw["tools"])]
        denied = {pi_names.get(t.lower(), t) for t in _tokens(raw.get("disallowed_tools", ""))}
        if "*" in tokens:
            # every built-in this machine offers, BrowserPreview where a browser is on PATH
            wanted = set(pi_names.values()) | ({"BrowserPreview"} if find_browser() else set())
        else:
            wanted = {pi_names[t] for t in tokens if t in pi_names}
        if "memory" in raw and "Write" in wanted - denied:
            wanted |= {"Edit"}  # read-write memory brings Edit along (seed 003)
        assert {t for t in callable_tools if not t.startswith("mcp__")} == wanted - denied, source
    assert checked >= 20


def test_explain_json_names_the_dialect_as_the_source_of_a_claude_code_file(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    [source] = [f for f in _claude_files() if f.name == ".claude__agents__architect.md"]
    folder = tmp_path / ".claude" / "agents"
    folder.mkdir(parents=True)
    shutil.copyfile(source, folder / "architect.md")
    assert main(["explain", "architect", "--json", "--project", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["definition"]["dialect"] == "claude-code"
    assert out["definition"]["fields"]["tools"]["source"] == "dialect:claude-code"
    # Task in a Claude Code subagent's tools has no effect there (Claude Code's docs): only
    # the main agent (a top-level run) gets the delegation tools, for any subagent.
    assert out["definition"]["fields"]["allowed_subagents"]["value"] == ["*"]
    assert {"Read", "Glob", "Grep"} <= set(out["tools"]["callable"])
    assert "Task" not in out["tools"]["callable"]
    assert out["invocation"]["model"]["source"] == "parent"
    argv = ["explain", "architect", "--json", "--top-level", "--project", str(tmp_path)]
    assert main(argv) == 0
    assert "Task" in json.loads(capsys.readouterr().out)["tools"]["callable"]


def test_every_corpus_file_loads_from_its_native_root(tmp_path: Path, isolated_home: Path) -> None:
    placed = {
        **_install(_claude_files(), tmp_path / ".claude" / "agents"),
        **_install(_opencode_files(), tmp_path / ".opencode" / "agents"),
        **_install(_pi_files(), tmp_path / ".pi" / "agents"),
    }
    catalog = Catalog(project=tmp_path)
    loaded = [*catalog.definitions().values()] + [
        d for losers in catalog.shadowed.values() for d in losers
    ]
    assert catalog.errors == []
    assert len([d for d in loaded if not d.builtin]) == len(placed)
