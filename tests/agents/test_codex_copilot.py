"""Codex custom agents (``.codex/agents/*.toml``) and GitHub Copilot agents
(``.github/agents/*.agent.md``, ``.github/chatmodes/*.chatmode.md``): found in their product's
folders, read with their product's meaning, explained with the dialect as the source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from membrane import Catalog
from membrane.cli.app import main

REVIEWER = '''\
name = "reviewer"
description = "Reviews changes for correctness."
model = "openai:gpt-5-codex"
model_reasoning_effort = "high"
sandbox_mode = "read-only"
nickname_candidates = ["Atlas", "Delta"]
developer_instructions = """
Review the diff. Report only real defects.
"""

[mcp_servers.docs]
url = "http://127.0.0.1:9/mcp"
startup_timeout_sec = 20
'''

PLANNER = """\
---
name: planner
description: 'Plans features.'
tools: ['read', 'search', 'edit/editFiles', 'runCommands', 'github/*', 'web/fetch', 'agent']
target: vscode
---
Plan the feature.
"""


def explain(project: Path, agent: str, capsys: pytest.CaptureFixture[str], *extra: str) -> Any:
    code = main(["explain", agent, "--json", "--project", str(project), *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def put(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def codes(report: Any) -> set[str]:
    return {w["code"] for w in report["warnings"]}


def test_a_codex_custom_agent_is_found_and_read_with_codex_meaning(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = put(tmp_path / ".codex" / "agents" / "reviewer.toml", REVIEWER)
    definition = Catalog(project=tmp_path).get("reviewer")
    assert definition is not None
    assert (definition.root, definition.dialect, definition.path) == (
        "codex-project",
        "codex",
        str(path),
    )
    assert definition.extra["nickname_candidates"] == ["Atlas", "Delta"]
    report = explain(tmp_path, "reviewer", capsys)
    fields = report["definition"]["fields"]
    # read-only: what it may read and search, nothing that writes or runs commands.
    assert set(report["tools"]["callable"]) == {"Read", "Glob", "Grep"}
    assert fields["tools"] == {
        "value": ["Read", "Glob", "Grep"], "source": "dialect:codex", "key": "sandbox_mode",
        "line": 5,
    }  # fmt: skip
    assert report["invocation"]["thinking"] == {"value": "high", "source": "dialect:codex"}
    assert report["invocation"]["model"] == {
        "value": "openai:gpt-5-codex",
        "source": "dialect:codex",
    }
    assert fields["mcp_servers"]["value"]["docs"]["url"] == "http://127.0.0.1:9/mcp"
    [server] = definition.mcp_servers.values()  # type: ignore[union-attr]
    assert server is not None and server.startup_timeout == 20
    assert report["prompt"]["system"].endswith("Review the diff. Report only real defects.")


def test_codex_sandbox_modes_and_approval_policy(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = tmp_path / ".codex" / "agents"
    head = 'description = "W"\ndeveloper_instructions = "Work."\n'
    put(agents / "writer.toml", head + 'sandbox_mode = "workspace-write"\n')
    put(
        agents / "asker.toml",
        head + 'sandbox_mode = "workspace-write"\napproval_policy = "on-request"\n',
    )
    put(agents / "wide.toml", head + 'sandbox_mode = "danger-full-access"\n')
    put(agents / "plain.toml", head)
    all_tools = {"Read", "Glob", "Grep", "Edit", "Write", "Bash"}
    writer = explain(tmp_path, "writer", capsys)
    assert set(writer["tools"]["callable"]) == all_tools
    assert writer["permissions"]["tools"] == {}
    asker = explain(tmp_path, "asker", capsys)
    rules = asker["permissions"]["tools"]
    assert [r["verdict"] for r in rules["Bash"]["rules"]] == ["ask"]
    assert [r["source"] for r in rules["Edit"]["rules"]] == ["dialect:codex"]
    wide = explain(tmp_path, "wide", capsys)
    assert set(wide["tools"]["callable"]) == all_tools and "dialect-unsupported" in codes(wide)
    # sandbox_mode left out: Codex gives the parent's sandbox; Membrane its read-only default.
    plain = explain(tmp_path, "plain", capsys)
    assert set(plain["tools"]["callable"]) == {"Read", "Glob", "Grep"}
    assert "dialect-default-differs" in codes(plain)


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ('name = "x"\nsandbox_mode = "yolo"\n', "`sandbox_mode` is 'yolo'", 2),
        ('name = "x"\ndescription = \n', "is not valid TOML", 2),
        ('name = "x"\ndeveloper_instructions = 3\n', "`developer_instructions` is not text", 2),
    ],
)
def test_a_broken_codex_file_is_reported_with_its_line_and_skipped(
    tmp_path: Path, isolated_home: Path, text: str, message: str, line: int
) -> None:
    put(tmp_path / ".codex" / "agents" / "good.toml", 'description = "G"\n')
    bad = put(tmp_path / ".codex" / "agents" / "bad.toml", text)
    catalog = Catalog(project=tmp_path)
    assert catalog.get("good") is not None
    [error] = catalog.errors
    assert error.path == str(bad) and error.line == line and message in str(error)


def test_deeply_nested_codex_toml_is_refused_in_one_pass(
    tmp_path: Path, isolated_home: Path
) -> None:
    put(tmp_path / ".codex" / "agents" / "deep.toml", "x = " + "[" * 50_000 + "]" * 50_000)
    catalog = Catalog(project=tmp_path)  # its CPU time: bench/bench_hostile.py
    [error] = catalog.errors
    assert "nests deeper than 64" in str(error)


def test_a_copilot_agent_is_found_and_its_tools_mapped(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path / ".github" / "agents" / "planner.agent.md", PLANNER)
    put(tmp_path / ".github" / "agents" / "bare.agent.md", "---\ndescription: B\n---\nGo.\n")
    put(
        tmp_path / ".github" / "chatmodes" / "review.chatmode.md",
        "---\ndescription: R\ntools: ['codebase', 'search']\n---\nReview.\n",
    )
    catalog = Catalog(project=tmp_path)
    found = {n: (d.root, d.dialect) for n, d in catalog.definitions().items() if not d.builtin}
    assert found == {
        "planner": ("copilot-project", "copilot"),
        "bare": ("copilot-project", "copilot"),
        "review": ("copilot-project", "copilot"),
    }
    report = explain(tmp_path, "planner", capsys)
    fields = report["definition"]["fields"]
    assert fields["tools"]["value"] == [
        "Read", "Grep", "Glob", "Edit", "Write", "Bash", "mcp__github__*", "web/fetch"
    ]  # fmt: skip
    assert fields["allowed_subagents"] == {
        "value": ["*"], "source": "dialect:copilot", "key": "tools", "line": 4
    }  # fmt: skip
    callable_tools = set(report["tools"]["callable"])
    assert {"Read", "Grep", "Glob", "Edit", "Write", "Bash", "Task"} <= callable_tools
    assert "unknown-tool" in codes(report)  # web/fetch grants nothing
    # Copilot asks before it runs a terminal command.
    bash = report["permissions"]["tools"]["Bash"]["rules"]
    assert [(r["verdict"], r["source"]) for r in bash] == [("ask", "dialect:copilot")]
    bare = explain(tmp_path, "bare", capsys)
    assert set(bare["tools"]["callable"]) == {"Read", "Glob", "Grep"}
    assert "dialect-default-differs" in codes(bare)
    review = explain(tmp_path, "review", capsys)
    assert set(review["tools"]["callable"]) == {"Grep", "Glob"}


def test_copilot_mcp_servers_become_the_agents_servers(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(
        tmp_path / ".github" / "agents" / "docs.agent.md",
        "---\ndescription: D\ntools: ['read', 'docs/*']\nmcp-servers:\n"
        "  docs:\n    type: http\n    url: http://127.0.0.1:9/mcp\n    tools: ['*']\n"
        "  partial:\n    type: local\n    command: srv\n    tools: ['one']\n---\nDocs.\n",
    )
    report = explain(tmp_path, "docs", capsys)
    servers = report["definition"]["fields"]["mcp_servers"]["value"]
    assert list(servers) == ["docs"] and servers["docs"]["url"] == "http://127.0.0.1:9/mcp"
    [note] = [w["message"] for w in report["warnings"] if "partial" in w["message"]]
    assert "lists only some of its tools" in note


def test_settings_turn_codex_and_copilot_off(tmp_path: Path, isolated_home: Path) -> None:
    put(tmp_path / ".codex" / "agents" / "c.toml", 'description = "C"\n')
    put(tmp_path / ".github" / "agents" / "g.agent.md", "---\ndescription: G\n---\nGo.\n")
    config = put(tmp_path / ".membrane" / "config.toml", "codex_agents = false\n")
    names = {n for n, d in Catalog(project=tmp_path).definitions().items() if not d.builtin}
    assert names == {"g"}
    config.write_text("copilot_agents = false\n", encoding="utf-8")
    names = {n for n, d in Catalog(project=tmp_path).definitions().items() if not d.builtin}
    assert names == {"c"}


def test_a_codex_fifo_is_reported_at_once_and_never_read(
    tmp_path: Path, isolated_home: Path
) -> None:
    import os

    agents = tmp_path / ".codex" / "agents"
    put(agents / "good.toml", 'description = "G"\n')
    os.mkfifo(agents / "pipe.toml")
    catalog = Catalog(project=tmp_path)
    assert catalog.get("good") is not None
    [error] = catalog.errors
    assert error.path == str(agents / "pipe.toml")


def test_agents_validate_reads_a_codex_file_as_codex(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = put(tmp_path / ".codex" / "agents" / "reviewer.toml", REVIEWER)
    bad = put(tmp_path / ".codex" / "agents" / "bad.toml", 'sandbox_mode = "yolo"\n')
    assert main(["agents", "validate", str(good), "--project", str(tmp_path)]) == 0
    done = capsys.readouterr()
    assert "1 usable, 0 unusable" in done.out + done.err
    assert main(["agents", "validate", str(bad), "--project", str(tmp_path)]) != 0
    out = capsys.readouterr()
    assert f"{bad}:1: definition-invalid: `sandbox_mode` is 'yolo'" in out.out + out.err
