"""Other products' settings files, as a user of those products writes them, applied to every
agent of the tree: Claude Code's ``.claude/settings.json`` (user, project, local) and OpenCode's
``opencode.json``. Each test builds a temporary project the way the product's docs lay it out and
checks ``explain --json`` or a real headless run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import json_lines, write

from membrane.cli.app import main

LEAD = """\
---
name: lead
description: Leads the work.
tools: Bash
allowed_subagents: [worker]
---
Lead.
"""
#: A Claude Code subagent as Claude Code's docs write one.
WORKER = """\
---
name: worker
description: Does the work.
tools: Bash, Edit, Read
---
Work.
"""
CLAUDE_SETTINGS = {
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "permissions": {
        "allow": ["Bash(npm run test:*)"],
        "ask": ["Bash(git push:*)"],
        "deny": ["Bash(rm:*)", "Read(./.env)", "Edit", "WebFetch", "Agent(explorer)"],
        "additionalDirectories": ["../docs"],
        "defaultMode": "acceptEdits",
    },
    "model": "sonnet",
    "env": {"NODE_ENV": "test"},
}
SCRIPT = """\
agents:
  lead:
    - tool_calls:
        - {name: Bash, arguments: {command: "rm -f out/lead.txt"}}
        - {name: Task, arguments: {agent: worker, task: work}}
    - text: lead done
  worker:
    - tool_calls:
        - {name: Bash, arguments: {command: "rm -f out/worker.txt"}}
        - {name: Bash, arguments: {command: "git push origin main"}}
        - {name: Bash, arguments: {command: "echo ok"}}
    - text: worker done
"""


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "project"
    write(root / ".membrane" / "agents" / "lead.md", LEAD)
    write(root / ".claude" / "agents" / "worker.md", WORKER)
    write(root / "out" / "lead.txt", "")
    write(root / "out" / "worker.txt", "")
    (tmp_path / "docs").mkdir()
    return root


def _explain(
    project: Path, agent: str, capsys: pytest.CaptureFixture[str], *extra: str
) -> dict[str, Any]:
    assert main(["explain", agent, "--project", str(project), "--json", *extra]) == 0
    payload: dict[str, Any] = json.loads(capsys.readouterr().out)
    return payload


def _settings(path: Path, document: object) -> None:
    write(path, json.dumps(document, indent=2))


def test_claude_code_project_settings_show_in_explain_with_their_file_as_source(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _settings(project / ".claude" / "settings.json", CLAUDE_SETTINGS)
    shown = _explain(project, "worker", capsys)
    source = ".claude/settings.json"
    assert shown["settings"]["permission_mode"] == {"value": "acceptEdits", "source": source}
    assert shown["settings"]["default_model"] == {"value": "sonnet", "source": source}
    assert shown["invocation"]["permission"]["value"] == "acceptEdits"
    assert shown["model"]["model"] == "claude-sonnet-5-5"
    assert {"path": str(tmp_path / "docs"), "source": f"settings:{source}"} in shown["checkout"][
        "read_roots"
    ]
    assert shown["tools"]["left_out"]["Edit"] == f"settings:{source}"
    ceiling = shown["permissions"]["ceiling"]
    assert {"tool": "WebFetch", "source": f"settings:{source}"} in ceiling["denied"]
    rules = {(r["rule"], r["verdict"], r["ceiling"]) for r in ceiling["rules"]}
    assert rules >= {
        ("Bash(npm run test:*)", "allow", f"settings:{source}"),
        ("Bash(git push:*)", "ask", f"settings:{source}"),
        ("Bash(rm:*)", "deny", f"settings:{source}"),
        ("Read(./.env)", "deny", f"settings:{source}"),
        ("Agent(explorer)", "deny", f"settings:{source}"),
    }
    ignored = [w for w in shown["warnings"] if w["code"] == "setting-ignored"]
    assert [w["message"] for w in ignored] == [
        f"{source}: `env` is a setting Membrane does not apply (ignored)"
    ]


def test_the_files_layer_user_then_opencode_then_project_then_local_then_membrane(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claude_home = Path(os.environ["CLAUDE_CONFIG_DIR"])
    _settings(
        claude_home / "settings.json", {"model": "haiku", "permissions": {"defaultMode": "plan"}}
    )
    shown = _explain(project, "worker", capsys)
    assert shown["settings"]["default_model"]["source"] == str(claude_home / "settings.json")
    assert shown["settings"]["permission_mode"]["value"] == "plan"

    _settings(project / "opencode.json", {"model": "anthropic/claude-opus-4-1"})
    assert _explain(project, "worker", capsys)["settings"]["default_model"] == {
        "value": "anthropic/claude-opus-4-1",
        "source": "opencode.json",
    }
    _settings(project / ".claude" / "settings.json", {"model": "opus"})
    _settings(
        project / ".claude" / "settings.local.json", {"permissions": {"defaultMode": "default"}}
    )
    shown = _explain(project, "worker", capsys)
    assert shown["settings"]["default_model"] == {
        "value": "opus",
        "source": ".claude/settings.json",
    }
    assert shown["settings"]["permission_mode"] == {
        "value": "default",
        "source": ".claude/settings.local.json",
    }
    write(project / ".membrane" / "config.toml", 'default_model = "anthropic:claude-haiku-4-5"\n')
    shown = _explain(project, "worker", capsys)
    assert shown["settings"]["default_model"] == {
        "value": "anthropic:claude-haiku-4-5",
        "source": ".membrane/config.toml",
    }
    overridden = [w["message"] for w in shown["warnings"] if w["code"] == "setting-overridden"]
    assert overridden == [
        ".claude/settings.json sets default_model = 'opus'; .membrane/config.toml sets it too "
        "and wins"
    ]


def test_a_deny_and_an_ask_of_the_settings_hold_for_the_agent_and_its_subagent(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The allow covers `echo`, which Claude Code (and so the worker's file) would ask about.
    _settings(
        project / ".claude" / "settings.json",
        {
            "permissions": {
                "allow": ["Bash(echo:*)"],
                "ask": ["Bash(git push:*)"],
                "deny": ["Bash(rm:*)"],
            }
        },
    )
    script = write(tmp_path / "script.yaml", SCRIPT)
    args = ["run", "lead", "go", "--project", str(project), "--model", f"scripted:{script}"]
    assert main([*args, "--json"]) == 0
    events = json_lines(capsys.readouterr().out)
    vetoed = [
        (e["agent"], e["data"]["code"], e["data"]["rule"])
        for e in events
        if e["kind"] == "vetoed_call"
    ]
    assert vetoed == [
        ("lead", "tool-call-denied", "Bash(rm:*)"),
        ("worker", "tool-call-denied", "Bash(rm:*)"),
        ("worker", "approval-unavailable", "Bash(git push:*)"),
    ]
    results = [e["data"] for e in events if e["kind"] == "tool_result" and e["agent"] == "worker"]
    assert [r["is_error"] for r in results] == [True, True, False]
    assert (project / "out" / "lead.txt").exists() and (project / "out" / "worker.txt").exists()


def test_opencode_permission_blocks_hold_with_the_last_matching_key_winning(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _settings(
        project / "opencode.json",
        {
            "$schema": "https://opencode.ai/config.json",
            "permission": {"edit": "deny", "bash": {"*": "ask", "echo *": "allow"}},
            "theme": "opencode",
        },
    )
    shown = _explain(project, "worker", capsys)
    assert shown["tools"]["left_out"]["Edit"] == "settings:opencode.json"
    assert "Write" not in shown["tools"]["callable"]
    assert [w["message"] for w in shown["warnings"] if w["code"] == "setting-ignored"] == [
        "opencode.json: `theme` is a setting Membrane does not apply (ignored)"
    ]
    script = write(
        tmp_path / "script.yaml",
        "agents:\n  worker:\n    - tool_calls:\n"
        '        - {name: Bash, arguments: {command: "echo ok"}}\n'
        '        - {name: Bash, arguments: {command: "ls"}}\n'
        "    - text: done\n",
    )
    args = ["run", "worker", "go", "--project", str(project), "--model", f"scripted:{script}"]
    assert main([*args, "--json"]) == 0
    events = json_lines(capsys.readouterr().out)
    results = [e["data"] for e in events if e["kind"] == "tool_result"]
    assert [(r["is_error"], r.get("code")) for r in results] == [
        (False, None),
        (True, "approval-unavailable"),
    ]


def _unusable(shown: dict[str, Any]) -> list[str]:
    return [w["message"] for w in shown["warnings"] if w["code"] == "setting-file-unusable"]


def test_a_settings_file_that_is_not_json_is_warned_about_and_skipped(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(project / ".claude" / "settings.json", '{"permissions": {"deny": ["Bash(rm:*)"],}\n')
    _settings(project / "opencode.json", {"permission": {"bash": {"rm *": "deny"}}})
    shown = _explain(project, "worker", capsys)
    (message,) = _unusable(shown)
    assert message.startswith(f"{project / '.claude' / 'settings.json'}: invalid JSON at line 1")
    assert message.endswith("nothing of the file is applied (fix it)")
    # The other files still apply.
    rules = shown["permissions"]["ceiling"]["rules"]
    assert [(r["rule"], r["ceiling"]) for r in rules] == [("Bash(rm *)", "settings:opencode.json")]


@pytest.mark.parametrize(
    ("document", "key"),
    [
        ({"permissions": {"deny": "Bash(rm:*)"}}, "permissions.deny"),
        ({"permissions": {"defaultMode": ["plan"]}}, "permissions.defaultMode"),
        ({"model": 3}, "model"),
    ],
)
def test_a_key_membrane_reads_in_the_wrong_shape_leaves_the_file_out_with_a_warning(
    project: Path, capsys: pytest.CaptureFixture[str], document: object, key: str
) -> None:
    _settings(project / ".claude" / "settings.json", document)
    (message,) = _unusable(_explain(project, "worker", capsys))
    assert f"`{key}`" in message


def test_a_deny_rule_that_cannot_be_read_refuses_the_whole_tool(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _settings(project / ".claude" / "settings.json", {"permissions": {"deny": ["Bash(rm:*"]}})
    shown = _explain(project, "worker", capsys)
    assert shown["tools"]["left_out"]["Bash"] == "settings:.claude/settings.json"
    stricter = [w["message"] for w in shown["warnings"] if w["code"] == "setting-rule-stricter"]
    assert stricter == [
        ".claude/settings.json: deny `Bash(rm:*` is not a rule; every Bash call is refused"
    ]


def test_a_fifo_in_place_of_a_settings_file_is_skipped_without_blocking(
    project: Path, isolated_home: Path
) -> None:
    os.mkfifo(project / ".claude" / "settings.json")
    done = subprocess.run(
        [sys.executable, "-m", "membrane", "explain", "worker", "--project", str(project)],
        capture_output=True,
        text=True,
        timeout=120,  # bounds a hang only: the command ends at once
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "not a regular file" in done.stdout + done.stderr


def test_a_setting_turns_the_products_files_off(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _settings(project / ".claude" / "settings.json", CLAUDE_SETTINGS)
    _settings(project / "opencode.json", {"permission": {"bash": "deny"}})
    write(
        project / ".membrane" / "config.toml",
        "claude_code_settings = false\nopencode_settings = false\n",
    )
    shown = _explain(project, "worker", capsys)
    assert shown["permissions"]["ceiling"]["rules"] == []
    assert shown["permissions"]["ceiling"]["denied"] == []
    assert set(shown["settings"]) == {"claude_code_settings", "opencode_settings"}


def test_a_model_no_provider_serves_is_warned_and_not_used(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _settings(project / ".claude" / "settings.json", {"model": "gemini-2.5-pro"})
    shown = _explain(project, "worker", capsys)
    assert "default_model" not in shown["settings"]
    unusable = [w["message"] for w in shown["warnings"] if w["code"] == "setting-model-unusable"]
    assert len(unusable) == 1 and unusable[0].startswith(
        ".claude/settings.json: `model` 'gemini-2.5-pro' is not used"
    )


def test_an_allow_of_the_settings_approves_a_call_that_asks_only_for_want_of_a_rule(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Only rules grant this agent's Bash, so a command no rule allows asks.
    write(
        project / ".membrane" / "agents" / "echoer.md",
        "---\nname: echoer\ndescription: Echoes.\ntools: Bash(echo:*)\n---\nEcho.\n",
    )
    _settings(
        project / ".claude" / "settings.json",
        {"permissions": {"allow": ["Bash(ls:*)", "Bash(pwd)"], "ask": ["Bash(pwd)"]}},
    )
    script = write(
        tmp_path / "script.yaml",
        "agents:\n  echoer:\n    - tool_calls:\n"
        '        - {name: Bash, arguments: {command: "ls"}}\n'
        '        - {name: Bash, arguments: {command: "pwd"}}\n'
        '        - {name: Bash, arguments: {command: "touch made.txt"}}\n'
        "    - text: done\n",
    )
    args = ["run", "echoer", "go", "--project", str(project), "--model", f"scripted:{script}"]
    assert main([*args, "--json"]) == 0
    events = json_lines(capsys.readouterr().out)
    results = [e["data"] for e in events if e["kind"] == "tool_result"]
    # ls: approved by the allow; pwd: the ask wins over the allow; touch: nothing allows it.
    assert [(r["is_error"], r.get("code")) for r in results] == [
        (False, None),
        (True, "approval-unavailable"),
        (True, "approval-unavailable"),
    ]


HOOKED = """\
agents:
  lead:
    - tool_calls:
        - {name: Bash, arguments: {command: "echo lead"}}
        - {name: Task, arguments: {agent: worker, task: work}}
    - text: lead done
  worker:
    - tool_calls:
        - {name: Bash, arguments: {command: "echo worker"}}
        - {name: Bash, arguments: {command: "rm -f out/worker.txt"}}
    - text: worker done
"""
#: Refuses a Bash call whose command starts with rm (Claude Code's exit 2 blocks the call).
NO_RM = "grep -q '\"command\": \"rm' && { echo 'no rm here' >&2; exit 2; }; exit 0"


def _call(result: dict[str, Any]) -> int:
    """A scripted call's position in its turn (its id ends with it)."""
    return int(str(result["id"]).rsplit("_", 1)[-1])


def _hook(command: str, matcher: str | None = None) -> dict[str, Any]:
    group: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
    if matcher is not None:
        group["matcher"] = matcher
    return group


def test_settings_hooks_fire_for_every_agent_and_subagent_events_for_subagents(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _settings(
        project / ".claude" / "settings.json",
        {
            "permissions": {"allow": ["Bash(echo:*)", "Bash(rm:*)"]},
            "hooks": {
                "PreToolUse": [_hook(NO_RM, "Bash")],
                "PostToolUse": [_hook("cat > /dev/null", "Bash")],
                "UserPromptSubmit": [_hook("cat > /dev/null")],
                "Stop": [_hook("cat > /dev/null")],
                "SubagentStart": [_hook("cat > /dev/null", "worker"), _hook("false", "other")],
                "SubagentStop": [_hook("cat > /dev/null", "work.*")],
                "SessionStart": [_hook("cat > /dev/null")],
            },
        },
    )
    shown = _explain(project, "worker", capsys)
    assert shown["settings"]["product_hooks"]["source"] == ".claude/settings.json"
    left_out = [w["message"] for w in shown["warnings"] if w["code"] == "setting-ignored"]
    assert len(left_out) == 1 and "`hooks.SessionStart`" in left_out[0]

    script = write(tmp_path / "script.yaml", HOOKED)
    args = ["run", "lead", "go", "--project", str(project), "--model", f"scripted:{script}"]
    assert main([*args, "--json"]) == 0
    events = json_lines(capsys.readouterr().out)
    fired = [
        (e["agent"], e["data"]["event"], e["data"].get("tool"), e["data"]["decision"])
        for e in events
        if e["kind"] == "hook"
    ]
    # The lead's Bash and Task calls run side by side: each agent's hooks keep their own order.
    assert [f[1:] for f in fired if f[0] == "lead"] == [
        ("UserPromptSubmit", None, "ok"),
        ("PreToolUse", "Bash", "ok"),
        ("PostToolUse", "Bash", "ok"),
        ("Stop", None, "ok"),
    ]
    assert [f[1:] for f in fired if f[0] == "worker"] == [
        ("SubagentStart", None, "ok"),
        ("PreToolUse", "Bash", "ok"),
        ("PostToolUse", "Bash", "ok"),
        ("PreToolUse", "Bash", "block"),
        ("SubagentStop", None, "ok"),
    ]
    assert fired[-1] == ("lead", "Stop", None, "ok")
    vetoed = [(e["agent"], e["data"]["code"]) for e in events if e["kind"] == "vetoed_call"]
    assert vetoed == [("worker", "tool-call-denied")]
    assert (project / "out" / "worker.txt").exists()


def test_opencode_permissions_list_holds_and_asks_for_the_built_ins_it_never_names(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _settings(
        project / "opencode.json",
        {
            "permissions": [
                {"action": "shell", "resource": "*", "effect": "deny"},
                {"action": "shell", "resource": "echo *", "effect": "allow"},
                {"action": "edit", "resource": "*", "effect": "deny"},
            ]
        },
    )
    shown = _explain(project, "worker", capsys)
    assert shown["tools"]["left_out"]["Edit"] == "settings:opencode.json"
    rules = [(r["rule"], r["verdict"]) for r in shown["permissions"]["ceiling"]["rules"]]
    assert rules == [
        ("Read", "ask"),
        ("Glob", "ask"),
        ("Grep", "ask"),
        ("Bash", "deny"),
        ("Bash(echo *)", "allow"),
    ]
    script = write(
        tmp_path / "script.yaml",
        "agents:\n  worker:\n    - tool_calls:\n"
        '        - {name: Bash, arguments: {command: "echo ok"}}\n'
        '        - {name: Bash, arguments: {command: "ls"}}\n'
        '        - {name: Read, arguments: {file_path: "out/worker.txt"}}\n'
        "    - text: done\n",
    )
    args = ["run", "worker", "go", "--project", str(project), "--model", f"scripted:{script}"]
    assert main([*args, "--json"]) == 0
    results = [e["data"] for e in json_lines(capsys.readouterr().out) if e["kind"] == "tool_result"]
    # The Read runs beside the two Bash calls: results in the order of the calls' ids.
    assert [(r["name"], r["is_error"], r.get("code")) for r in sorted(results, key=_call)] == [
        ("Bash", False, None),
        ("Bash", True, "tool-call-denied"),
        ("Read", True, "approval-unavailable"),
    ]


def test_opencode_permission_and_permissions_together_leave_the_file_out(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _settings(
        project / "opencode.json",
        {
            "permission": {"bash": "deny"},
            "permissions": [{"action": "shell", "resource": "*", "effect": "allow"}],
        },
    )
    (message,) = _unusable(_explain(project, "worker", capsys))
    assert "`permission` and `permissions` both hold rules" in message


def test_explain_tables_name_the_file_of_each_setting(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _settings(project / ".claude" / "settings.json", CLAUDE_SETTINGS)
    assert main(["explain", "worker", "--project", str(project)]) == 0
    out = capsys.readouterr().out
    settings = out[out.index("Settings") :]
    rows = [line.split() for line in settings.splitlines()[2:] if line.strip()]
    assert ["permission_mode", "acceptEdits", ".claude/settings.json"] in rows
    assert ["default_model", "sonnet", ".claude/settings.json"] in rows


def test_disable_bypass_permissions_mode_holds_every_agent_below_bypass(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        project / ".claude" / "agents" / "bold.md",
        "---\nname: bold\ndescription: Bold.\ntools: Bash\npermissionMode: bypassPermissions\n"
        "---\nGo.\n",
    )
    _settings(
        project / ".claude" / "settings.local.json",
        {"permissions": {"disableBypassPermissionsMode": "disable"}},
    )
    shown = _explain(project, "bold", capsys)
    assert shown["invocation"]["permission"] == {
        "value": "acceptEdits",
        "source": "settings:.claude/settings.local.json",
    }
    assert not [w for w in shown["warnings"] if w["code"] == "setting-ignored"]


def test_opencode_user_config_is_layered_below_the_projects_as_opencode_merges_them(
    project: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json"
    _settings(user, {"model": "openai/gpt-5", "permission": {"edit": "deny"}})
    shown = _explain(project, "worker", capsys)
    assert shown["settings"]["default_model"] == {"value": "openai/gpt-5", "source": str(user)}
    assert shown["tools"]["left_out"]["Edit"] == f"settings:{user}"

    # The project's file wins a key both set; the user's rules still hold (merged, not replaced).
    _settings(project / "opencode.json", {"model": "anthropic/claude-opus-4-1"})
    shown = _explain(project, "worker", capsys)
    assert shown["settings"]["default_model"]["source"] == "opencode.json"
    assert shown["tools"]["left_out"]["Edit"] == f"settings:{user}"

    # Without $XDG_CONFIG_HOME, OpenCode's folder is ~/.config/opencode.
    home = tmp_path / "user-home"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(home))
    (project / "opencode.json").unlink()
    dotted = home / ".config" / "opencode" / "opencode.json"
    _settings(dotted, {"model": "openai/gpt-5-mini"})
    assert _explain(project, "worker", capsys)["settings"]["default_model"] == {
        "value": "openai/gpt-5-mini",
        "source": str(dotted),
    }
