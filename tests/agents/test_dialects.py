"""Dialect roots: where other products' files are found, how they rank, and what they mean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membrane import UNSET, Catalog
from membrane.cli.app import main
from membrane.errors import DefinitionError, UnknownSubagent


def write(path: Path, frontmatter: str, body: str = "Do the work.") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{frontmatter}\n---\n{body}\n", encoding="utf-8")
    return path


def explain(project: Path, agent: str, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    code = main(["explain", agent, "--json", "--project", str(project), *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)  # type: ignore[no-any-return]


def test_each_dialect_root_is_read_with_its_dialect(tmp_path: Path, isolated_home: Path) -> None:
    claude_home = Path(str(isolated_home.parent / "claude-home"))
    write(claude_home / "agents" / "mine.md", "name: mine\ndescription: from ~/.claude")
    write(tmp_path / ".claude" / "agents" / "a.md", "name: a\ndescription: A")
    write(tmp_path / ".opencode" / "agent" / "b.md", "description: B\nmode: subagent")
    write(tmp_path / ".opencode" / "agents" / "c.md", "description: C")
    write(tmp_path / ".pi" / "agents" / "d.md", "description: D\ntools: read, find")
    (tmp_path / "opencode.json").write_text(
        json.dumps({"agent": {"e": {"description": "E", "prompt": "Be E.", "steps": 3}}}),
        encoding="utf-8",
    )
    catalog = Catalog(project=tmp_path)
    found = {
        name: (d.root, d.dialect) for name, d in catalog.definitions().items() if not d.builtin
    }
    assert found == {
        "mine": ("claude-code-global", "claude-code"),
        "a": ("claude-code-project", "claude-code"),
        "b": ("opencode-project", "opencode"),
        "c": ("opencode-project", "opencode"),
        "d": ("pi-project", "pi"),
        "e": ("opencode-project", "opencode"),
    }
    e = catalog.get("e")
    assert e is not None and (e.body, e.max_turns, e.path) == (
        "Be E.",
        3,
        f"{tmp_path / 'opencode.json'}#e",
    )
    assert catalog.get("d").tools == ("read", "Glob")  # type: ignore[union-attr]
    assert catalog.reload() is False


def test_membranes_own_roots_win_a_name_collision(tmp_path: Path, isolated_home: Path) -> None:
    claude = write(tmp_path / ".claude" / "agents" / "r.md", "name: reviewer\ndescription: claude")
    write(isolated_home / "agents" / "r.md", "name: reviewer\ndescription: membrane global")
    catalog = Catalog(project=tmp_path)
    assert catalog.get("reviewer").description == "membrane global"  # type: ignore[union-attr]
    assert [d.path for d in catalog.shadowed["reviewer"]] == [str(claude)]


def test_pi_agents_outrank_global_and_agents_agents_as_seed_003_orders_them(
    tmp_path: Path, isolated_home: Path
) -> None:
    glob = write(isolated_home / "agents" / "r.md", "name: reviewer\ndescription: global")
    shared = tmp_path / ".agents" / "agents" / "r.md"
    write(shared, "name: reviewer\ndescription: workspace")
    pi = write(tmp_path / ".pi" / "agents" / "r.md", "name: reviewer\ndescription: pi")
    catalog = Catalog(project=tmp_path)
    assert catalog.get("reviewer").description == "pi"  # type: ignore[union-attr]
    assert [d.path for d in catalog.shadowed["reviewer"]] == [str(shared), str(glob)]
    # The project's own .membrane/agents still outranks pi's folder.
    write(tmp_path / ".membrane" / "agents" / "r.md", "name: reviewer\ndescription: project")
    catalog = Catalog(project=tmp_path)
    assert catalog.get("reviewer").description == "project"  # type: ignore[union-attr]
    assert catalog.shadowed["reviewer"][0].path == str(pi)


def test_agents_agents_reads_pis_spellings_and_keeps_membranes_fields(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / ".agents" / "agents"
    write(
        folder / "scout.md",
        "name: scout\ndescription: Scouts.\ntools: read, find, ls\n"
        "allowed_subagents: all\nisolation: false\n"
        "rules:\n  - {tool: Read, deny: {file_path: {glob: '*.env'}}}",
    )
    write(folder / "quiet.md", 'name: quiet\ndescription: Quiet.\ntools: ""')
    catalog = Catalog(project=tmp_path)
    assert catalog.errors == []
    scout, quiet = catalog.get("scout"), catalog.get("quiet")
    assert scout is not None and quiet is not None
    assert (scout.root, scout.dialect) == ("workspace", "membrane")
    assert scout.tools == ("read", "Glob")  # pi's find and ls
    assert scout.allowed_subagents == ("*",) and scout.isolation is UNSET
    assert quiet.tools == ()  # pi: an empty `tools` is no built-in tool
    shown = explain(tmp_path, "scout", capsys)
    rules = shown["permissions"]["tools"]  # Membrane's own field, read as Membrane reads it
    assert [r["verdict"] for r in rules["Read"]["rules"]] == ["deny"]


def test_a_setting_turns_each_dialect_off(tmp_path: Path, isolated_home: Path) -> None:
    write(tmp_path / ".claude" / "agents" / "a.md", "name: a")
    write(tmp_path / ".opencode" / "agents" / "b.md", "description: B")
    write(tmp_path / ".pi" / "agents" / "c.md", "description: C")
    config = tmp_path / ".membrane" / "config.toml"
    config.parent.mkdir()
    config.write_text("claude_code_agents = false\npi_agents = false\n", encoding="utf-8")
    names = {n for n, d in Catalog(project=tmp_path).definitions().items() if not d.builtin}
    assert names == {"b"}
    config.write_text("opencode_agents = false\n", encoding="utf-8")
    names = {n for n, d in Catalog(project=tmp_path).definitions().items() if not d.builtin}
    assert names == {"a", "c"}


def test_claude_code_omitted_tools_follow_the_setting(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / ".claude" / "agents" / "w.md", "name: worker\ndescription: W")
    out = explain(tmp_path, "worker", capsys)
    assert out["tools"]["callable"] == ["Glob", "Grep", "Read"]
    [warning] = [w for w in out["warnings"] if w["code"] == "dialect-default-differs"]
    assert 'claude_code_omitted_tools = "inherit"' in warning["message"]
    assert warning["line"] is not None and warning["file"].endswith("w.md")
    config = tmp_path / ".membrane" / "config.toml"
    config.parent.mkdir()
    config.write_text('claude_code_omitted_tools = "inherit"\n', encoding="utf-8")
    out = explain(tmp_path, "worker", capsys)
    assert set(out["tools"]["callable"]) >= {"Bash", "Edit", "Write", "Read"}
    assert out["definition"]["fields"]["tools"]["value"] == ["inherit"]
    assert not any(w["code"] == "dialect-default-differs" for w in out["warnings"])


def test_claude_code_fields_map_onto_membrane_fields(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        tmp_path / ".claude" / "agents" / "f.md",
        "name: fixer\ndescription: F\ntools: Read, Edit, Agent(scout, explorer)\n"
        "disallowedTools: Bash\nmodel: sonnet\nmaxTurns: 7\npermissionMode: plan\n"
        "background: true\nmemory: project\nmcpServers: [github]\neffort: max",
    )
    config = tmp_path / ".membrane" / "config.toml"
    config.parent.mkdir()
    config.write_text('[model_aliases]\nsonnet = "anthropic:claude-sonnet-4-5"\n', "utf-8")
    out = explain(tmp_path, "fixer", capsys)
    invocation = out["invocation"]
    dialect = "dialect:claude-code"
    assert invocation["model"] == {"value": "anthropic:claude-sonnet-4-5", "source": dialect}
    assert invocation["max_turns"] == {"value": 7, "source": dialect}
    assert invocation["run_in_background"] == {"value": True, "source": dialect}
    assert invocation["permission"] == {"value": "plan", "source": dialect}
    assert invocation["thinking"] == {"value": "xhigh", "source": dialect}
    fields = out["definition"]["fields"]
    assert fields["allowed_subagents"]["value"] == ["scout", "explorer"]
    assert fields["tools"]["value"] == ["Read", "Edit"]
    assert fields["mcp_servers"]["key"] == "mcpServers"
    assert fields["disallowed_tools"] == {
        "value": ["Bash"], "source": dialect, "key": "disallowedTools", "line": 5
    }  # fmt: skip
    assert fields["max_turns"]["key"] == "maxTurns"
    assert "Read" in out["tools"]["callable"]
    assert out["tools"]["left_out"]["Bash"] == "disallowed_tools"
    # permissionMode: plan leaves every mutating tool out (Edit is granted, then withheld; a
    # child started with Task could change files too).
    assert out["tools"]["left_out"]["Edit"] == "permission mode plan"
    assert out["permissions"]["mode"] == "plan"
    # Agent(scout, explorer) is for the main agent only: a top-level run in plan mode has Task
    # withheld by the mode (a child it started could change files too).
    top = explain(tmp_path, "fixer", capsys, "--top-level")
    assert top["tools"]["left_out"]["Task"] == "permission mode plan"


def test_an_opencode_primary_agent_is_not_dispatched_for_a_child(
    tmp_path: Path, isolated_home: Path
) -> None:
    write(tmp_path / ".opencode" / "agents" / "lead.md", "description: L\nmode: primary")
    (tmp_path / ".membrane").mkdir()
    (tmp_path / ".membrane" / "config.toml").write_text('fallback_subagent = "none"\n', "utf-8")
    catalog = Catalog(project=tmp_path)
    assert catalog.dispatch("lead", child=False).definition.name == "lead"
    with pytest.raises(UnknownSubagent, match="primary agent"):
        catalog.dispatch("lead")


def test_a_repaired_name_is_refused_when_its_slug_collides(
    tmp_path: Path, isolated_home: Path
) -> None:
    repaired = write(tmp_path / ".claude" / "agents" / "p.md", "name: Python Expert")
    other = write(tmp_path / ".membrane" / "agents" / "x.md", "name: python-expert")
    catalog = Catalog(project=tmp_path)
    assert catalog.get("python-expert").path == str(other)  # type: ignore[union-attr]
    [error] = catalog.errors
    assert isinstance(error, DefinitionError)
    assert error.data["path"] == str(repaired) and error.data["other"] == str(other)
    assert str(repaired) in str(error) and str(other) in str(error)
    other.unlink()
    catalog.reload()
    assert catalog.errors == [] and catalog.get("python-expert").path == str(repaired)  # type: ignore[union-attr]


def test_agents_list_shows_each_definitions_dialect(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / ".claude" / "agents" / "a.md", "name: a")
    assert main(["agents", "list", "--json", "--project", str(tmp_path)]) == 0
    agents = {a["name"]: a for a in json.loads(capsys.readouterr().out)["agents"]}
    assert (agents["a"]["dialect"], agents["explorer"]["dialect"]) == ("claude-code", "membrane")
    assert main(["agents", "list", "--project", str(tmp_path)]) == 0
    assert "claude-code" in capsys.readouterr().out


def test_a_broken_opencode_json_is_reported_and_skipped(
    tmp_path: Path, isolated_home: Path
) -> None:
    (tmp_path / "opencode.json").write_text('{\n  "agent": {\n    "x": {,}\n', "utf-8")
    catalog = Catalog(project=tmp_path)
    [error] = catalog.errors
    assert error.data["line"] == 3 and "invalid JSON" in error.message


def test_a_changed_opencode_json_is_read_again_on_reload(
    tmp_path: Path, isolated_home: Path
) -> None:
    config = tmp_path / "opencode.json"
    config.write_text('{"agent": {"a": {"description": "A", "prompt": "One."}}}', "utf-8")
    catalog = Catalog(project=tmp_path)
    assert catalog.get("a").body == "One."  # type: ignore[union-attr]
    assert catalog.reload() is False
    config.write_text('{"agent": {"b": {"description": "B", "prompt": "Two."}}}', "utf-8")
    assert catalog.reload() is True
    assert catalog.get("a") is None and catalog.get("b").body == "Two."  # type: ignore[union-attr]


def test_the_definition_cache_follows_the_omitted_tools_setting(
    tmp_path: Path, isolated_home: Path
) -> None:
    write(tmp_path / ".claude" / "agents" / "w.md", "name: worker")
    cache = tmp_path / "state" / "definitions.json"
    assert Catalog(project=tmp_path, cache=cache).get("worker").tools is UNSET  # type: ignore[union-attr]
    assert cache.exists()
    config = tmp_path / ".membrane" / "config.toml"
    config.parent.mkdir()
    config.write_text('claude_code_omitted_tools = "inherit"\n', encoding="utf-8")
    again = Catalog(project=tmp_path, cache=cache).get("worker")
    assert again is not None and again.tools == ("inherit",)
