"""The model names other products' files use work here: Claude Code's ``sonnet``/``opus``/
``haiku``, OpenCode's and pi's ``provider/model`` ids; a file's model no provider serves falls
back to the run's default model with a ``model-fallback`` warning naming the file and line (or,
with ``unknown_model = "error"``, fails the start); a model the host names stays strict; and
``agents list``/``validate`` say which agents can start here. Checked through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from membrane.cli.app import main

SCRIPT = "agents:\n  {name}:\n    - text: done\n"


def _project(tmp_path: Path, folder: str, name: str, model: str, config: str = "") -> Path:
    project = tmp_path / "project"
    agents = project / folder
    agents.mkdir(parents=True)
    head = f"---\nname: {name}\n" if folder != ".opencode/agents" else "---\n"
    (agents / f"{name}.md").write_text(
        f"{head}description: Answers.\nmodel: {model}\ntools: Read\n---\nAnswer.\n"
    )
    (tmp_path / "script.yaml").write_text(SCRIPT.format(name=name))
    settings = f'default_model = "scripted:{tmp_path / "script.yaml"}"\n' + config
    (project / ".membrane").mkdir()
    (project / ".membrane" / "config.toml").write_text(settings)
    return project


def _explain(project: Path, name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["explain", name, "--project", str(project), "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("folder", "written", "provider", "model"),
    [
        (".claude/agents", "sonnet", "anthropic", "claude-sonnet-5-5"),
        (".claude/agents", "opus", "anthropic", "claude-opus-5-5"),
        (".claude/agents", "haiku", "anthropic", "claude-haiku-5-5"),
        (".claude/agents", "Sonnet", "anthropic", "claude-sonnet-5-5"),
        (
            ".opencode/agents",
            "anthropic/claude-haiku-4-5-20251001",
            "anthropic",
            "claude-haiku-4-5-20251001",
        ),
        (".opencode/agents", "openai/gpt-5", "openai", "gpt-5"),
        (".pi/agents", "anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
        (".pi/agents", "claude-opus-4-1", "anthropic", "claude-opus-4-1"),
        (".claude/agents", "sonnet[1m]", "anthropic", "claude-sonnet-5-5"),
        (".claude/agents", "claude-sonnet-4-5[1m]", "anthropic", "claude-sonnet-4-5"),
    ],
)
def test_a_products_model_name_resolves_to_its_provider(
    tmp_path: Path,
    isolated_home: Path,
    capsys: pytest.CaptureFixture[str],
    folder: str,
    written: str,
    provider: str,
    model: str,
) -> None:
    project = _project(tmp_path, folder, "answerer", written)
    data = _explain(project, "answerer", capsys)
    assert (data["model"]["provider"], data["model"]["model"]) == (provider, model)
    assert data["model"]["via"] == f"product:{written}"
    assert not [w for w in data["warnings"] if w["code"] in ("model-fallback", "unknown-model")]


def test_model_aliases_win_over_a_built_in_name(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = '[model_aliases]\nsonnet = "openai:gpt-5-mini"\n'
    project = _project(tmp_path, ".claude/agents", "answerer", "sonnet", config)
    data = _explain(project, "answerer", capsys)
    assert (data["model"]["provider"], data["model"]["model"]) == ("openai", "gpt-5-mini")


def test_a_model_no_provider_serves_falls_back_with_file_and_line(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path, ".opencode/agents", "gem", "google/gemini-2.5-pro")
    data = _explain(project, "gem", capsys)
    assert data["invocation"]["model"] == {"value": None, "source": "deployment"}
    assert data["model"]["provider"] == "scripted"
    [warning] = [w for w in data["warnings"] if w["code"] == "model-fallback"]
    assert warning["file"] == str(project / ".opencode" / "agents" / "gem.md")
    assert warning["line"] == 3
    assert "google/gemini-2.5-pro" in warning["message"]
    # A real start runs on the default model, and its published event says why.
    assert main(["run", "gem", "go", "--project", str(project), "--headless", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[-1]["status"] == "completed"
    [published] = [e for e in lines if e["kind"] == "published"]
    assert published["data"]["model_fallback"]["code"] == "model-fallback"
    assert published["data"]["model_fallback"]["line"] == 3


def test_unknown_model_error_keeps_the_name_and_the_start_fails(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = 'unknown_model = "error"\n'
    project = _project(tmp_path, ".opencode/agents", "gem", "opencode/grok-code", config)
    data = _explain(project, "gem", capsys)
    assert data["invocation"]["model"]["value"] == "opencode/grok-code"
    codes = [w["code"] for w in data["warnings"]]
    assert "unknown-model" in codes and "model-fallback" not in codes
    assert main(["run", "gem", "go", "--project", str(project), "--headless", "--json"]) != 0
    assert "unknown-model" in capsys.readouterr().err


def test_a_model_the_host_names_stays_strict(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = _project(tmp_path, ".claude/agents", "answerer", "sonnet")
    args = ["run", "answerer", "go", "--project", str(project), "--headless"]
    assert main([*args, "--model", "google/gemini-2.5-pro"]) == 2
    assert capsys.readouterr().err.startswith("unknown-model")


def test_agents_list_and_validate_say_which_agents_can_start(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    for name, model in (("fast", "haiku"), ("odd", "fable"), ("plain", None)):
        line = "" if model is None else f"model: {model}\n"
        (agents / f"{name}.md").write_text(f"---\nname: {name}\ndescription: D.\n{line}---\nB.\n")
    assert main(["agents", "list", "--project", str(project), "--json"]) == 0
    listed = {a["name"]: a for a in json.loads(capsys.readouterr().out)["agents"]}
    assert listed["fast"]["model"]["provider"] == "anthropic"
    assert listed["fast"]["model"]["can_start"] is True
    for name in ("odd", "plain"):  # no default model: both would run on nothing
        assert listed[name]["model"]["can_start"] is False
        assert "--model" in listed[name]["model"]["reason"]
    assert [w["code"] for w in listed["odd"]["warnings"]].count("model-fallback") == 1
    assert main(["agents", "validate", "--project", str(project), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["can_start"] == 1
    starts = {a["name"]: a["model"]["can_start"] for a in report["agents"]}
    assert starts == {"fast": True, "odd": False, "plain": False}
    (project / ".membrane").mkdir()
    (project / ".membrane" / "config.toml").write_text('default_model = "openai:gpt-5"\n')
    assert main(["agents", "validate", "--project", str(project), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["can_start"] == 3


@pytest.mark.parametrize(
    ("mode", "model"), [("plan", "claude-opus-5-5"), ("default", "claude-sonnet-5-5")]
)
def test_opusplan_is_opus_while_the_agent_plans_and_sonnet_otherwise(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str], mode: str, model: str
) -> None:
    project = _project(tmp_path, ".claude/agents", "planner", "opusplan")
    file = project / ".claude" / "agents" / "planner.md"
    file.write_text(
        file.read_text().replace("tools: Read\n", f"tools: Read\npermissionMode: {mode}\n")
    )
    data = _explain(project, "planner", capsys)
    assert (data["model"]["provider"], data["model"]["model"]) == ("anthropic", model)
    assert data["invocation"]["model"]["source"] == "dialect:claude-code"
    assert not [w for w in data["warnings"] if w["code"] in ("model-fallback", "unknown-model")]


@pytest.mark.parametrize(("mode", "model"), [("plan", "opus"), ("default", "sonnet")])
def test_a_default_model_of_opusplan_is_opus_while_the_agent_plans_and_sonnet_otherwise(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str], mode: str, model: str
) -> None:
    project = tmp_path / "project"
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "planner.md").write_text(
        f"---\nname: planner\ndescription: Plans.\ntools: Read\npermissionMode: {mode}\n---\nP.\n"
    )
    aliases = []
    for name in ("opus", "sonnet"):
        (tmp_path / f"{name}.yaml").write_text(f"default:\n  - text: {name} answered\n")
        aliases.append(f'{name} = "scripted:{tmp_path / f"{name}.yaml"}"')
    (project / ".membrane").mkdir()
    (project / ".membrane" / "config.toml").write_text(
        'default_model = "opusplan"\n[model_aliases]\n' + "\n".join(aliases) + "\n"
    )
    data = _explain(project, "planner", capsys)
    assert (data["model"]["spec"], data["model"]["source"]) == (model, "settings:default_model")
    assert main(["run", "planner", "go", "--project", str(project), "--headless", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[-1]["status"] == "completed" and lines[-1]["text"] == f"{model} answered"
