"""The role a run carries is shown where it matters: ``explain --role`` resolves it as a start
would, ``membrane run --role`` runs under it (headless too), the ``published`` event records it
and a call it vetoes names it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import error_code, json_lines, write

from membrane.cli.app import main

READER = """\
---
name: reader
description: Reads, and runs shell commands.
tools: Read, Bash
---
Look around.
"""
SCRIPT = {
    "agents": {
        "reader": [
            {"tool_calls": [{"name": "Bash", "arguments": {"command": "ls"}}]},
            {"text": "ok"},
        ]
    }
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    write(root / ".membrane" / "agents" / "reader.md", READER)
    write(root / ".membrane" / "config.toml", '[roles.ops]\nallow = ["Read", "Bash"]\n')
    write(tmp_path / "script.json", json.dumps(SCRIPT))
    return root


def _explain(project: Path, capsys: pytest.CaptureFixture[str], *role: str) -> dict[str, object]:
    args = ["explain", "reader", "--top-level", "--project", str(project), "--json", *role]
    assert main(args) == 0
    payload = json.loads(capsys.readouterr().out)
    assert isinstance(payload, dict)
    return payload


def test_explain_shows_a_run_under_a_role(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = _explain(project, capsys)
    external = _explain(project, capsys, "--role", "external")
    ops = _explain(project, capsys, "--role", "ops")
    assert (own["role"], external["role"], ops["role"]) == (None, "external", "ops")
    tools = {
        name: payload["tools"]["callable"]  # type: ignore[index]
        for name, payload in (("own", own), ("external", external), ("ops", ops))
    }
    assert tools == {"own": ["Bash", "Read"], "external": ["Read"], "ops": ["Bash", "Read"]}
    left_out = external["tools"]["left_out"]  # type: ignore[index]
    assert left_out["Bash"] == "role"
    assert external["authority_digest"] != own["authority_digest"]
    assert main(["explain", "reader", "--project", str(project), "--role", "nobody"]) == 2
    assert error_code(capsys.readouterr().err) == "invalid-request"


def test_run_under_a_role_records_it_and_its_veto_names_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = f"scripted:{project.parent / 'script.json'}"
    args = ["run", "reader", "look", "--project", str(project), "--model", model, "--json"]
    assert main([*args, "--headless", "--role", "external"]) == 0
    events = json_lines(capsys.readouterr().out)
    published = next(e for e in events if e.get("kind") == "published")
    vetoed = [e["data"] for e in events if e.get("kind") == "vetoed_call"]
    assert published["data"]["role"] == "external"
    assert published["data"]["tools"] == ["Read"]
    assert vetoed == [
        {"name": "Bash", "id": vetoed[0]["id"], "code": "tool-not-visible", "role": "external"}
    ]
    # The same run as explain shows it: the digest it published is explain's under that role.
    explained = _explain(project, capsys, "--role", "external")
    assert published["data"]["authority_digest"] == explained["authority_digest"]
    # Its own authority (no role): the call runs, nothing is vetoed, the role is null.
    assert main([*args, "--headless"]) == 0
    events = json_lines(capsys.readouterr().out)
    published = next(e for e in events if e.get("kind") == "published")
    assert published["data"]["role"] is None
    assert not [e for e in events if e.get("kind") == "vetoed_call"]
    # In text, the tree says which role vetoed the call.
    assert main([*args[:-1], "--headless", "--role", "external"]) == 0
    assert "vetoed: Bash (tool-not-visible, role external)" in capsys.readouterr().out
    assert main([*args[:-1], "--headless", "--role", "nobody"]) == 2
    assert error_code(capsys.readouterr().err) == "invalid-request"
