"""``tool_choice``: a definition's field, resolved against what the agent can call, sent on its
turns until its first tool call, in each provider's wire form through the real SDKs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from replay import OPEN, ReplayServer, load

from membrane import Message, ModelRequest
from membrane.cli.app import main
from membrane.models.anthropic import AnthropicModel
from membrane.models.openai import OpenAIModel

KEY = "sk-test-abcdefgh12345678"
GREP = {"name": "Grep", "description": "Search.", "input_schema": {"type": "object"}}
REQUEST = ModelRequest(
    agent="scout",
    run_id="r1",
    system="Be brief.",
    messages=(Message("user", "find the markers"),),
    tools=(GREP,),
)
TEXT = {
    "json": {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "created": 1764547200,
        "model": "smollm2",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Found none."},
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }
}
SEEKER = (
    "---\nname: seeker\ndescription: Seeks.\ntools: Grep\nmodel: local\n"
    "tool_choice: {choice}\n---\nFind the markers.\n"
)


def project_on(tmp_path: Path, url: str, choice: str) -> Path:
    project = tmp_path / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "seeker.md").write_text(SEEKER.format(choice=choice))
    (project / ".membrane" / "config.toml").write_text(
        f'[models.local]\nprovider = "openai"\nbase_url = "{url}/v1"\nmodel = "smollm2"\n'
        "stream = false\n"
    )
    return project


@pytest.mark.parametrize(
    ("written", "sent"),
    [
        ("required", "required"),
        ("grep", {"type": "function", "function": {"name": "Grep"}}),
    ],
)
def test_the_definitions_tool_choice_reaches_openai_until_the_first_tool_call(
    tmp_path: Path,
    isolated_home: Path,
    capsys: pytest.CaptureFixture[str],
    written: str,
    sent: Any,
) -> None:
    with ReplayServer([*load("openai", "tool_call"), TEXT]) as server:
        project = project_on(tmp_path, server.url, written)
        assert main(["run", "seeker", "go", "--project", str(project), "--json"]) == 0
    first, second = (request["body"] for request in server.requests)
    assert first["tool_choice"] == sent
    assert "tool_choice" not in second  # after a tool call, the model may answer
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["text"] == "Found none."


def test_explain_shows_the_tool_choice_and_its_source(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = project_on(tmp_path, "http://127.0.0.1:9", "GREP")
    assert main(["explain", "seeker", "--project", str(project), "--json"]) == 0
    invocation = json.loads(capsys.readouterr().out)["invocation"]
    assert invocation["tool_choice"] == {"value": "Grep", "source": "frontmatter"}


def test_a_tool_the_agent_cannot_call_is_refused_before_anything_runs(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = project_on(tmp_path, "http://127.0.0.1:9", "Write")
    for command in (["run", "seeker", "go"], ["explain", "seeker"]):
        assert main([*command, "--project", str(project)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("tool-choice-invalid: tool_choice: 'Write'")
        # Only what was asked for is named: none of the tools the agent cannot see.
        for hidden in ("Bash", "Edit", "Read", "Glob"):
            assert hidden not in err
    assert main(["runs", "--project", str(project), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == []  # no run was stored


@pytest.mark.anyio
@pytest.mark.usefixtures("close_models")
@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ("Grep", {"type": "tool", "name": "Grep"}),
    ],
)
async def test_anthropic_receives_its_own_tool_choice_form(choice: str, sent: Any) -> None:
    with ReplayServer(load("anthropic", "parallel_whole")) as server:
        model = AnthropicModel("claude-sonnet-4-6", api_key=KEY, base_url=server.url, stream=False)
        OPEN.append(model)
        await model.request(dataclasses.replace(REQUEST, tool_choice=choice))
    assert server.requests[0]["body"]["tool_choice"] == sent


@pytest.mark.anyio
@pytest.mark.usefixtures("close_models")
@pytest.mark.parametrize("choice", ["auto", "required", "none"])
async def test_openai_receives_the_modes_as_words(choice: str) -> None:
    with ReplayServer(load("openai", "tool_call")) as server:
        server.repeat = True
        model = OpenAIModel("gpt-4o", api_key=KEY, base_url=server.url + "/v1", stream=False)
        OPEN.append(model)
        await model.request(dataclasses.replace(REQUEST, tool_choice=choice))
        await model.request(dataclasses.replace(REQUEST, tool_choice=choice, tools=()))
    assert server.requests[0]["body"]["tool_choice"] == choice
    assert "tool_choice" not in server.requests[1]["body"]  # no tools: nothing to choose from
