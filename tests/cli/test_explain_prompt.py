"""``membrane explain`` prints the system prompt the first model request really carries.

Every agent of the example workspace is explained and then run for real (the model is a
``FunctionModel`` that records its requests): the explained system prompt and the first
``ModelRequest.system`` are the same text, byte for byte, persona rendered. A persona the
runtime refuses, explain refuses too, with the same code.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest

from membrane import SubagentRuntime, SubagentStartRequest
from membrane.cli.app import main
from membrane.errors import InvalidPersona
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.models.function import FunctionModel

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workspace"
AGENTS = ("auditor", "lead", "scout")
PERSONA = (
    'persona = "Stockroom review desk. You are {{agent}} (asked for as {{agent_type}}) at '
    'depth {{depth}} (model: {{model}}), working in {{cwd}} of {{project}}."\n'
)


@pytest.fixture
def stockroom(tmp_path: Path, isolated_home: Path) -> Path:
    """The example workspace with a deployment persona that names the child's variables."""
    root = tmp_path / "stockroom"
    shutil.copytree(EXAMPLE, root)
    config = root / ".membrane" / "config.toml"
    config.write_text(config.read_text(encoding="utf-8") + PERSONA, encoding="utf-8")
    return root


def _explained(capsys: pytest.CaptureFixture[str], agent: str, project: Path, *extra: str) -> str:
    capsys.readouterr()
    assert main(["explain", agent, "--project", str(project), "--json", *extra]) == 0
    system = json.loads(capsys.readouterr().out)["prompt"]["system"]
    assert isinstance(system, str)
    return system


async def _answer(request: ModelRequest) -> ModelResponse:
    return ModelResponse(text="done")


def _first_systems(model: FunctionModel) -> dict[str, str]:
    first: dict[str, str] = {}
    for request in model.requests:
        first.setdefault(request.agent, request.system)
    return first


def test_explain_top_level_is_the_first_request_of_a_host_start(
    stockroom: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    explained = {agent: _explained(capsys, agent, stockroom, "--top-level") for agent in AGENTS}
    model = FunctionModel(_answer)

    async def run() -> None:
        with anyio.fail_after(60):
            async with SubagentRuntime.open(stockroom, model=model) as runtime:
                for agent in AGENTS:
                    await runtime.run(SubagentStartRequest(agent_type=agent, task="Review."))

    anyio.run(run)
    sent = _first_systems(model)
    for agent in AGENTS:
        assert "{{" not in sent[agent]
        assert f"You are {agent} (asked for as {agent}) at depth 0 " in sent[agent]
        assert explained[agent] == sent[agent], agent


def test_explain_is_the_first_request_of_a_child_a_parent_starts(
    stockroom: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``lead`` starts ``scout`` and ``auditor`` with Task: each child's first request is what
    ``membrane explain`` (a child one level below a top-level session) printed for it."""
    explained = {agent: _explained(capsys, agent, stockroom) for agent in ("auditor", "scout")}

    async def lead(request: ModelRequest) -> ModelResponse:
        if request.agent != "lead" or len(request.messages) > 1:
            return ModelResponse(text="done")
        calls = tuple(
            ToolCall(f"t-{name}", "Task", {"agent": name, "task": "Look at the markers."})
            for name in ("scout", "auditor")
        )
        return ModelResponse(tool_calls=calls, stop_reason="tool_calls")

    model = FunctionModel(lead)

    async def run() -> None:
        with anyio.fail_after(60):
            async with SubagentRuntime.open(stockroom, model=model) as runtime:
                await runtime.run(SubagentStartRequest(agent_type="lead", task="Review."))

    anyio.run(run)
    sent = _first_systems(model)
    for agent in ("auditor", "scout"):
        assert f"You are {agent} (asked for as {agent}) at depth 1 " in sent[agent]
        assert explained[agent] == sent[agent], agent


def _explain_with(capsys: pytest.CaptureFixture[str], project: Path, config: str) -> int:
    """``explain scout --json`` under ``config`` (the example's cap kept); its exit code."""
    settings = project / ".membrane" / "config.toml"
    settings.write_text(f"max_depth = 1\n{config}\n", encoding="utf-8")
    capsys.readouterr()
    return main(["explain", "scout", "--project", str(project), "--json"])


def test_explain_refuses_a_persona_that_a_start_refuses(
    stockroom: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _explain_with(capsys, stockroom, 'persona = "Hello {{nobody}}."') == 2
    error = json.loads(capsys.readouterr().err)
    assert error["error"]["code"] == "invalid-persona"
    with pytest.raises(InvalidPersona):
        SubagentRuntime.open(stockroom, model=FunctionModel(_answer))


def test_explain_shows_the_run_id_it_cannot_know_as_a_placeholder(
    stockroom: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _explain_with(capsys, stockroom, 'persona = "Run {{run_id}} of {{agent}}."') == 0
    out = json.loads(capsys.readouterr().out)
    assert out["prompt"]["system"].startswith("Run <run_id> of scout.\n\n")
    assert any(
        w["code"] == "persona-placeholder" and "{{run_id}}" in w["message"] for w in out["warnings"]
    )


def test_explain_refuses_a_child_beyond_the_cap_as_a_start_does(
    stockroom: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example caps delegation at depth 1: below a parent at depth 1, a start is refused."""
    capsys.readouterr()
    args = ["explain", "scout", "--project", str(stockroom), "--json"]
    assert main([*args, "--parent", '{"depth": 1}']) != 0
    assert json.loads(capsys.readouterr().err)["error"]["code"] == "depth-limit-exceeded"
    assert main([*args, "--parent", '{"depth": 0}']) == 0
