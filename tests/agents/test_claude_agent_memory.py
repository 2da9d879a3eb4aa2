"""Claude Code agent memory (``memory: user|project|local``) as Claude Code keeps it: a Claude
Code file's memory lives in ``.claude/agent-memory/<name>/`` (``agent-memory-local``,
``~/.claude/agent-memory``), the first 200 lines of its ``MEMORY.md`` reach the prompt (explain
shows them with the path), and the agent may write that folder, through its file tools and its
sandboxed Bash, while ``.claude/settings.json``, ``.claude/agents`` and another agent's memory
stay out of reach. Checked through the CLI with a real headless run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from membrane.cli.app import main

NOTES = """\
---
name: notes
description: Keeps notes.
tools: Read, Write, Bash
memory: {scope}
---
Keep notes.
"""

SCRIPT = """\
agents:
  notes:
    - tool_calls:
        - name: Write
          arguments: {file_path: .claude/agent-memory/notes/MEMORY.md, content: "learned\\n"}
        - {name: Write, arguments: {file_path: .claude/settings.json, content: "{}"}}
        - {name: Write, arguments: {file_path: .claude/agents/evil.md, content: "x"}}
        - {name: Write, arguments: {file_path: .claude/agent-memory/other/MEMORY.md, content: "x"}}
        - {name: Bash, arguments: {command: "echo more >> .claude/agent-memory/notes/topic.md"}}
        - {name: Bash, arguments: {command: "echo '{}' > .claude/settings.json"}}
    - text: noted
"""


def _project(tmp_path: Path, scope: str) -> Path:
    project = tmp_path / "project"
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "notes.md").write_text(NOTES.format(scope=scope))
    (project / ".claude" / "settings.json").write_text('{"model": "sonnet"}\n')
    return project


def _prompt(project: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["explain", "notes", "--project", str(project), "--json"]) == 0
    return str(json.loads(capsys.readouterr().out)["prompt"]["system"])


@pytest.mark.parametrize(
    ("scope", "folder"), [("project", "agent-memory"), ("local", "agent-memory-local")]
)
def test_explain_shows_claude_code_memory_folder_and_the_first_200_lines(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str], scope: str, folder: str
) -> None:
    project = _project(tmp_path, scope)
    memory = project / ".claude" / folder / "notes" / "MEMORY.md"
    memory.parent.mkdir(parents=True)
    memory.write_text("".join(f"fact {n}\n" for n in range(1, 251)))
    prompt = _prompt(project, capsys)
    assert str(memory) in prompt
    assert "fact 200\n" in prompt and "fact 201" not in prompt


def test_a_user_scope_memory_is_read_from_claude_codes_user_folder(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path, "user")
    memory = Path(os.environ["CLAUDE_CONFIG_DIR"]) / "agent-memory" / "notes" / "MEMORY.md"
    memory.parent.mkdir(parents=True)
    memory.write_text("the user prefers tabs\n")
    prompt = _prompt(project, capsys)
    assert str(memory) in prompt and "the user prefers tabs" in prompt
    assert "You can read it but not change it." in prompt  # outside the checkout


def test_the_agent_writes_its_memory_and_never_claude_settings_or_agents(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path, "project")
    own = project / ".claude" / "agent-memory" / "notes"
    own.mkdir(parents=True)  # the folder the sandbox reopens for writing
    script = tmp_path / "script.yaml"
    script.write_text(SCRIPT)
    argv = ["run", "notes", "note it", "--project", str(project), "--headless", "--json"]
    argv += ["--model", f"scripted:{script}", "--permission-mode", "bypassPermissions"]
    assert main(argv) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    results = {e["data"]["id"]: e["data"] for e in events if e["kind"] == "tool_result"}
    assert len(results) == 6
    by_order = [results[key] for key in sorted(results)]
    written, settings, agent, other, appended, _ = by_order
    assert not written["is_error"] and not appended["is_error"]
    assert (own / "MEMORY.md").read_text() == "learned\n"
    assert (own / "topic.md").read_text() == "more\n"
    for refused in (settings, agent, other):
        assert refused["is_error"] and refused["code"] == "path-protected"
    # The shell's write to settings.json failed inside the sandbox: the file is unchanged.
    assert (project / ".claude" / "settings.json").read_text() == '{"model": "sonnet"}\n'
    assert not (project / ".claude" / "agents" / "evil.md").exists()
    assert not (project / ".claude" / "agent-memory" / "other").exists()
