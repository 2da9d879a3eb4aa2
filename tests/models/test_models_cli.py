"""Model specs through the CLI: ``--model``, ``default_model``, a definition's ``model:`` through
the aliases, explain's provider and source, and refusals before any request or run."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from replay import ReplayServer, load

from membrane.cli.app import main

LEAD = (
    "---\nname: lead\ndescription: Leads.\ntools: Read\nallowed_subagents: [helper]\n---\nLead.\n"
)
HELPER = "---\nname: helper\ndescription: Helps.\ntools: Read\nmodel: {model}\n---\nHelp.\n"
SCRIPT = """\
agents:
  lead:
    - tool_calls: [{name: Task, arguments: {agent: helper, task: say done}}]
    - text: lead is done
"""


def make_project(tmp_path: Path, config: str, helper_model: str = "fast") -> Path:
    project = tmp_path / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "lead.md").write_text(LEAD)
    (agents / "helper.md").write_text(HELPER.format(model=helper_model))
    (project / ".membrane" / "config.toml").write_text(config)
    (tmp_path / "script.yaml").write_text(SCRIPT)
    return project


def entry(url: str) -> str:
    return (
        f'[models.local]\nprovider = "openai"\nbase_url = "{url}/v1"\nmodel = "smollm2"\n'
        'api_key_env = "LOCAL_KEY"\n\n[model_aliases]\nfast = "local"\n'
    )


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_run_on_a_models_entry_and_default_model(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ReplayServer(load("openai", "text_stream")) as server:
        config = 'default_model = "local"\n' + entry(server.url)
        project = make_project(tmp_path, config)
        assert main(["run", "helper", "go", "--project", str(project), "--json"]) == 0
    lines = json_lines(capsys.readouterr().out)
    result = lines[-1]
    assert (result["kind"], result["status"], result["text"]) == (
        "result",
        "completed",
        "All done.",
    )
    usage = [line["data"] for line in lines if line["kind"] == "usage"]
    assert usage[0]["input_tokens"] == 42 and usage[0]["output_tokens"] == 3
    assert server.requests[0]["body"]["model"] == "smollm2"
    assert "authorization" in server.requests[0]["headers"]  # a placeholder: no key was set


def test_a_definitions_model_alias_answers_the_child(
    tmp_path: Path,
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("LOCAL_KEY", "sk-local-1234567")
    with ReplayServer(load("openai", "text_stream")) as server:
        project = make_project(tmp_path, entry(server.url))
        args = ["run", "lead", "go", "--project", str(project), "--json"]
        assert main([*args, "--model", f"scripted:{tmp_path / 'script.yaml'}"]) == 0
    lines = json_lines(capsys.readouterr().out)
    texts = {
        line["agent"]: line["data"].get("text") for line in lines if line["kind"] == "completed"
    }
    assert texts == {"lead": "lead is done", "helper": "All done."}
    assert len(server.requests) == 1  # only the helper asked the server
    assert server.requests[0]["headers"]["authorization"] == "Bearer sk-local-1234567"
    out = capsys.readouterr()
    assert "sk-local-1234567" not in out.out + out.err


def test_a_missing_key_fails_before_any_request_and_any_run(
    tmp_path: Path,
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    project = make_project(tmp_path, "")
    code = main(["run", "helper", "go", "--project", str(project), "--model", "openai:gpt-4o"])
    assert code == 3
    err = capsys.readouterr().err
    assert err.startswith("model-auth-failed:") and "OPENAI_API_KEY" in err
    assert main(["runs", "--project", str(project), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == []  # no run was stored


def test_an_unknown_name_in_a_definition_refuses_the_start_when_told_to(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # By default such a name falls back to the run's default model (tests/agents/
    # test_model_names.py); unknown_model = "error" keeps it, and the start is refused.
    project = make_project(tmp_path, 'unknown_model = "error"\n', helper_model="fable")
    script = f"scripted:{tmp_path / 'script.yaml'}"
    assert main(["run", "lead", "go", "--project", str(project), "--json", "--model", script]) == 0
    lines = json_lines(capsys.readouterr().out)
    results = [line["data"] for line in lines if line["kind"] == "tool_result"]
    assert results[0]["is_error"] and results[0]["code"] == "unknown-model"
    assert not [line for line in lines if line["kind"] == "published" and line["agent"] == "helper"]


def test_explain_shows_provider_model_and_source(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path, entry("http://127.0.0.1:9"))
    assert main(["explain", "helper", "--project", str(project), "--json"]) == 0
    model = json.loads(capsys.readouterr().out)["model"]
    # The catalog reads `model: fast` through [model_aliases] as it loads the definition.
    assert model == {
        "spec": "local",
        "provider": "openai",
        "model": "smollm2",
        "via": "entry:local",
        "base_url": "http://127.0.0.1:9/v1",
        "source": "frontmatter",
    }
    assert main(["explain", "helper", "--project", str(project)]) == 0
    assert "openai smollm2" in capsys.readouterr().out


def test_run_uses_the_agents_own_model_when_the_host_names_none(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No --model and no default_model: the helper's own `model: fast` (an alias of the
    # [models.local] entry) is enough to run it.
    with ReplayServer(load("openai", "text_stream")) as server:
        project = make_project(tmp_path, entry(server.url))
        assert main(["run", "helper", "go", "--project", str(project), "--json"]) == 0
    result = json_lines(capsys.readouterr().out)[-1]
    assert (result["status"], result["text"]) == ("completed", "All done.")
    assert [request["body"]["model"] for request in server.requests] == ["smollm2"]


def test_run_of_an_agent_without_a_model_names_every_way_to_give_one(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path, entry("http://127.0.0.1:9"), helper_model="inherit")
    assert main(["run", "helper", "go", "--project", str(project)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("invalid-request: no model for 'helper'")
    assert "--model" in err and "default_model" in err and "model:" in err


def test_doctor_model_sends_one_tiny_request_and_reports_the_reply(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ReplayServer(load("openai", "text_stream")) as server:
        server.repeat = True
        project = make_project(tmp_path, entry(server.url))
        assert main(["doctor", "--model", "fast", "--project", str(project), "--json"]) == 0
        checked = json.loads(capsys.readouterr().out)["model"]
        assert main(["doctor", "--model", "local", "--project", str(project)]) == 0
        text = capsys.readouterr().out
    assert checked["ok"] is True and checked["error"] is None
    assert (checked["spec"], checked["via"], checked["provider"], checked["model"]) == (
        "fast",
        "alias:fast",
        "openai",
        "smollm2",
    )
    assert checked["base_url"] == f"{server.url}/v1"
    assert checked["reply"] == "All done."
    assert isinstance(checked["latency_ms"], int) and checked["latency_ms"] >= 0
    body = server.requests[0]["body"]
    assert body["model"] == "smollm2" and "tools" not in body
    assert body["max_tokens"] == 16
    assert "reply:    'All done.'" in text and f"base_url: {server.url}/v1" in text


def test_doctor_model_reports_a_refused_connection_with_its_code_and_exits_1(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    project = make_project(tmp_path, entry(url))
    assert main(["doctor", "--model", "local", "--project", str(project), "--json"]) == 1
    checked = json.loads(capsys.readouterr().out)["model"]
    assert checked["ok"] is False and checked["reply"] is None
    assert checked["error"]["code"] == "model-unavailable"
    assert checked["base_url"] == f"{url}/v1"
    assert main(["doctor", "--model", "local", "--project", str(project)]) == 1
    assert "error:    model-unavailable: " in capsys.readouterr().out


def test_doctor_model_refuses_a_name_the_settings_do_not_know(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path, entry("http://127.0.0.1:9"))
    assert main(["doctor", "--model", "nowhere", "--project", str(project)]) == 2
    assert capsys.readouterr().err.startswith("unknown-model:")
