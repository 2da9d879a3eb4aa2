"""The CLI never surprises: an unknown agent is exit 2 with the closest names, a broken file is
never "unknown", and every ``--json`` document (errors included) has one shape per command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cli_schemas import AGENTS, EXPLAIN, FAILURE, VALIDATE

from membrane.cli.app import main


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    agents = tmp_path / ".membrane" / "agents"
    write(agents / "lead.md", "---\nname: lead\ndescription: Leads.\n---\nLead.\n")
    write(agents / "leader.md", "---\nname: leader\ndescription: Leads more.\n---\nLead.\n")
    write(agents / "broken.md", "---\nname: broken\ntools: none, Read\n---\nBroken.\n")
    write(
        tmp_path / ".claude" / "agents" / "r.md",
        "---\nname: Code Helper\ndescription: Helps.\ntools: Read, WebFetch\n---\nHelp.\n",
    )
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_run_with_an_unknown_agent_exits_2_with_the_closest_names(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "run", "leed", "do it", "--project", str(project))
    assert code == 2 and out == ""
    assert err.startswith("unknown-agent: agent `leed` is unknown")
    assert "`lead`" in err and "`leader`" in err


def test_run_with_a_broken_file_reports_the_files_error_not_unknown(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "run", "broken", "do it", "--project", str(project), "--json")
    assert code == 2
    failure = json.loads(err)
    jsonschema.validate(failure, FAILURE)
    error = failure["error"]
    assert (error["code"], failure["exit_code"]) == ("unknown-agent", 2)
    assert "cannot be used" in error["message"] and "mixes `none` with names" in error["message"]
    assert error["data"]["file_error"]["code"] == "definition-invalid"
    assert error["data"]["file_error"]["data"]["line"] == 3


def test_validate_json_is_one_document_of_objects(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "agents", "validate", "--json", "--project", str(project))
    assert code == 1  # broken.md is unusable
    document = json.loads(out)
    jsonschema.validate(document, VALIDATE)
    assert (document["files"], document["unusable"]) == (4, 1)
    codes = {(w["code"], Path(w["file"]).name) for w in document["warnings"]}
    assert ("repaired-name", "r.md") in codes and ("unknown-tool", "r.md") in codes
    assert ("dialect-default-differs", "r.md") not in codes


def test_validate_a_claude_code_file_by_path_uses_its_dialect(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = project / ".claude" / "agents" / "r.md"
    code, out, _ = run(capsys, "agents", "validate", "--json", str(file))
    assert code == 0
    codes = [w["code"] for w in json.loads(out)["warnings"]]
    assert "repaired-name" in codes


def test_list_json_warnings_are_objects(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "agents", "list", "--json", "--project", str(project))
    assert code == 0
    document: dict[str, Any] = json.loads(out)
    jsonschema.validate(document, AGENTS)
    [helper] = [a for a in document["agents"] if a["name"] == "code-helper"]
    assert helper["dialect"] == "claude-code"


def test_explain_json_warnings_are_objects_and_the_text_keeps_their_sentences(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        project / ".membrane" / "agents" / "m.md",
        "---\nname: m\ndescription: M.\ntempo: fast\ntools: Read, mcp__nope__x\n---\nM.\n",
    )
    code, out, _ = run(capsys, "explain", "m", "--json", "--project", str(project))
    assert code == 0
    document = json.loads(out)
    jsonschema.validate(document, EXPLAIN)
    by_code = {w["code"]: w for w in document["warnings"]}
    # The definition's own warning keeps its reader's file and line ...
    own = by_code["unknown-key"]
    assert (Path(own["file"]).name, own["line"]) == ("m.md", 4)
    # ... a warning of the resolution names the definition's file and no line.
    resolved = by_code["unknown-mcp-server"]
    assert (Path(resolved["file"]).name, resolved["line"]) == ("m.md", None)
    assert "'nope'" in resolved["message"]
    code, out, _ = run(capsys, "explain", "m", "--project", str(project))
    assert code == 0
    text = " ".join(out.split())
    assert "warning:" in text and "names the MCP server 'nope'" in text


def test_a_yaml_error_points_at_the_line_that_opened_the_broken_value(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = write(
        tmp_path / "a.md",
        "---\nname: a\ndescription: x\ntools: [Read, Grep\nmodel: inherit\n---\nBody\n",
    )
    code, out, _ = run(capsys, "agents", "validate", "--json", str(file))
    assert code == 1
    [error] = json.loads(out)["errors"]
    assert error["data"]["line"] == 4 and error["data"]["column"] == 8
    assert error["data"]["field"] == "tools"


def test_an_mcp_selector_naming_no_server_is_warned_at_validate_time(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / ".membrane" / "agents" / "m.md", "---\nname: m\ntools: mcp__nope__x\n---\n")
    code, out, _ = run(capsys, "agents", "validate", "--json", "--project", str(tmp_path))
    assert code == 0
    [warning] = [w for w in json.loads(out)["warnings"] if w["code"] == "unknown-server"]
    assert warning["line"] == 3 and "`nope`" in warning["message"]


def test_init_writes_a_starter_that_loads_and_keeps_existing_files(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "init", "--project", str(tmp_path), "--json")
    assert code == 0
    written = json.loads(out)["written"]
    assert sorted(Path(p).relative_to(tmp_path).as_posix() for p in written) == [
        ".membrane/agents/example.md",
        ".membrane/config.toml",
    ]
    code, out, _ = run(capsys, "explain", "example", "--json", "--project", str(tmp_path))
    assert code == 0 and json.loads(out)["tools"]["callable"] == ["Glob", "Grep", "Read"]
    config = tmp_path / ".membrane" / "config.toml"
    config.write_text("max_depth = 1\n", encoding="utf-8")
    code, out, _ = run(capsys, "init", "--project", str(tmp_path), "--json")
    assert json.loads(out) == {"written": [], "kept": [str(config), str(written[1])]}
    assert config.read_text(encoding="utf-8") == "max_depth = 1\n"
    # Nothing in the project is state: no .gitignore is needed or written.
    assert not (tmp_path / ".gitignore").exists()
    assert {p.name for p in (tmp_path / ".membrane").iterdir()} == {"agents", "config.toml"}
