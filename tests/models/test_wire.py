"""Real runs over the wire, through the real ``openai`` and ``anthropic`` SDKs, against a
loopback server that validates every request as llama.cpp's server, vLLM, Ollama and Anthropic's
Messages API do (``wire_server``): a three-level delegation completes on each wire, tool
arguments are read leniently, and unreadable ones are answered while the run goes on."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from replay import ReplayServer
from wire_server import WireServer

from membrane import SubagentRuntime, SubagentStartRequest
from membrane.models.anthropic import AnthropicModel
from membrane.models.openai import OpenAIModel
from membrane.models.retry import RetryPolicy
from membrane.models.sdk import SdkModel

pytestmark = pytest.mark.anyio

SECRET = "the stock count is 42"


async def _noop(seconds: float) -> None:
    return None


def _model(server: ReplayServer, wire: str, *, stream: bool) -> SdkModel[Any]:
    # One attempt only: a refused request must show, not be retried into success.
    retry = RetryPolicy(max_retries=0, sleep=_noop)
    if wire == "anthropic":
        return AnthropicModel("claude-sonnet-4-6", base_url=server.url, stream=stream, retry=retry)
    return OpenAIModel("smollm2", base_url=server.url + "/v1", stream=stream, retry=retry)


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "lead.md").write_text(
        "---\nname: lead\ndescription: Leads.\ntools: Read\nallowed_subagents: [middle]\n---\n"
        "Delegate.\n"
    )
    (agents / "middle.md").write_text(
        "---\nname: middle\ndescription: Delegates again.\ntools: Read\n"
        "allowed_subagents: [leaf]\n---\nDelegate.\n"
    )
    (agents / "leaf.md").write_text(
        "---\nname: leaf\ndescription: Reads.\ntools: Read\n---\nRead the file.\n"
    )
    (project / "notes.txt").write_text(SECRET + "\n")
    return project


def _last_tool_text(body: Mapping[str, Any]) -> str:
    """The text of the newest tool result in a request, on either wire."""
    for message in reversed(body["messages"]):
        if message.get("role") == "tool":
            return str(message["content"])
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_result":
                    inner = block.get("content")
                    return inner if isinstance(inner, str) else json.dumps(inner)
    return ""


def _delegation(agent: str, turn: int, body: Mapping[str, Any]) -> dict[str, Any]:
    """lead -> Task(middle) -> Task(leaf) -> Read; each then answers with what it was told."""
    if turn == 1:
        return {"text": f"{agent} heard: {_last_tool_text(body)}"}
    if agent == "lead":
        task = {"agent": "middle", "task": "Find the stock count."}
        return {"text": "", "tool_calls": [{"name": "Task", "arguments": task}]}
    if agent == "middle":
        task = {"agent": "leaf", "task": "Read notes.txt."}
        return {"text": "\n", "tool_calls": [{"name": "Task", "arguments": task}]}
    return {
        "text": "Reading.",
        "tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}],
    }


async def _run(server: ReplayServer, wire: str, project: Path, agent: str, *, stream: bool) -> Any:
    model = _model(server, wire, stream=stream)
    try:
        with anyio.fail_after(60):
            async with SubagentRuntime.open(
                project, model=model, state=project.parent / "state.db"
            ) as runtime:
                return await runtime.run(SubagentStartRequest(agent, "Go."))
    finally:
        await model.aclose()


@pytest.mark.parametrize(
    ("wire", "flavour", "stream"),
    [
        ("openai", "llama.cpp", False),
        ("openai", "vllm", True),
        ("openai", "ollama", True),
        ("openai", "fastapi", False),
        ("anthropic", "anthropic", True),
        ("anthropic", "anthropic", False),
    ],
)
async def test_a_three_level_delegation_with_tool_calls_completes_over_the_wire(
    tmp_path: Path, isolated_home: Path, wire: str, flavour: str, stream: bool
) -> None:
    project = _project(tmp_path)
    with WireServer(_delegation, wire=wire, flavour=flavour) as server:
        result = await _run(server, wire, project, "lead", stream=stream)
    assert server.refused == []
    assert result.status == "completed", result.error
    # The leaf's Read result flowed up through middle's and lead's Task results.
    assert result.text.startswith("lead heard: ") and SECRET in result.text
    assert len(server.requests) == 6
    assert set(server.issued.values()) == {"Task", "Read"}


def _one_call(arguments: object) -> Any:
    name = "Grep" if "pattern" in str(arguments) else "Read"

    def script(agent: str, turn: int, body: Mapping[str, Any]) -> dict[str, Any]:
        if turn == 0:
            return {"tool_calls": [{"name": name, "arguments": arguments}]}
        return {"text": f"told: {_last_tool_text(body)}"}

    return script


LENIENT = {
    "a raw newline and tab inside a string": (
        '{"pattern": "stock[ \t]count|never\nseen", "path": "notes.txt", "output_mode": "content"}'
    ),
    "a trailing comma": '{"file_path": "notes.txt",}',
    "a code fence": '```json\n{"file_path": "notes.txt"}\n```',
    "an object encoded twice": json.dumps(json.dumps({"file_path": "notes.txt"})),
}


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize("raw", LENIENT.values(), ids=LENIENT.keys())
async def test_arguments_a_strict_reader_refuses_are_read_and_the_call_runs(
    tmp_path: Path, isolated_home: Path, wire: str, raw: str
) -> None:
    project = _project(tmp_path)
    (project / ".membrane" / "agents" / "leaf.md").write_text(
        "---\nname: leaf\ndescription: Reads.\ntools: Read, Grep\n---\nRead.\n"
    )
    with WireServer(_one_call(raw), wire=wire) as server:
        result = await _run(server, wire, project, "leaf", stream=True)
    assert server.refused == []
    assert result.status == "completed", result.error
    assert SECRET in result.text


UNREADABLE = {
    "text that is not JSON": '{"file_path": "notes.txt"',
    "an array": "[1, 2]",
    "NaN": '{"file_path": NaN}',
}


@pytest.mark.parametrize(
    ("wire", "stream"),
    [("openai", True), ("openai", False), ("anthropic", True), ("anthropic", False)],
)
@pytest.mark.parametrize("raw", UNREADABLE.values(), ids=UNREADABLE.keys())
async def test_unreadable_arguments_are_answered_as_invalid_and_the_run_goes_on(
    tmp_path: Path, isolated_home: Path, wire: str, stream: bool, raw: str
) -> None:
    project = _project(tmp_path)
    with WireServer(_one_call(raw), wire=wire) as server:
        result = await _run(server, wire, project, "leaf", stream=stream)
    assert server.refused == []
    assert result.status == "completed", result.error
    assert "tool-arguments-invalid" in result.text and SECRET not in result.text
    # The server got the call back with the empty arguments it stands with, and its answer.
    assert len(server.requests) == 2
    assert "tool-arguments-invalid" in _last_tool_text(server.requests[1]["body"])


async def test_a_streamed_name_repeated_in_every_piece_is_kept_once(
    tmp_path: Path, isolated_home: Path
) -> None:
    # Some compatible servers repeat the id and the whole name in every piece of a call.
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def piece(arguments: str) -> dict[str, Any]:
        call = {
            "index": 0,
            "id": "call__0_Read_cmpl-9",
            "type": "function",
            "function": {"name": "Read", "arguments": arguments},
        }
        return chunk({"tool_calls": [call]})

    answers = [
        {
            "sse": [
                chunk({"role": "assistant"}),
                piece('{"file_path": '),
                piece('"notes.txt"}'),
                chunk({}, "tool_calls"),
                "[DONE]",
            ]
        },
        {"sse": [chunk({"content": "done"}), chunk({}, "stop"), "[DONE]"]},
    ]
    project = _project(tmp_path)
    with ReplayServer(answers) as server:
        result = await _run(server, "openai", project, "leaf", stream=True)
    assert result.status == "completed", result.error
    sent = server.requests[1]["body"]["messages"]
    (assistant,) = [m for m in sent if m["role"] == "assistant"]
    assert assistant["tool_calls"][0]["id"] == "call__0_Read_cmpl-9"
    assert assistant["tool_calls"][0]["function"]["name"] == "Read"
    (tool,) = [m for m in sent if m["role"] == "tool"]
    assert tool["tool_call_id"] == "call__0_Read_cmpl-9" and SECRET in tool["content"]


@pytest.mark.parametrize(
    ("wire", "flavour", "text"),
    [
        ("openai", "llama.cpp", ""),  # null content beside tool_calls: HTTP 500 there
        ("openai", "vllm", ""),
        ("anthropic", "anthropic", " \n"),  # a whitespace-only text block: HTTP 400
    ],
)
async def test_the_turn_after_a_tool_call_is_accepted_by_a_strict_server(
    tmp_path: Path, isolated_home: Path, wire: str, flavour: str, text: str
) -> None:
    def script(agent: str, turn: int, body: Mapping[str, Any]) -> dict[str, Any]:
        if turn == 0:
            call = {"name": "Read", "arguments": {"file_path": "notes.txt"}}
            return {"text": text, "tool_calls": [call]}
        return {"text": f"told: {_last_tool_text(body)}"}

    project = _project(tmp_path)
    with WireServer(script, wire=wire, flavour=flavour) as server:
        result = await _run(server, wire, project, "leaf", stream=False)
    assert server.refused == []
    assert result.status == "completed", result.error
    assert SECRET in result.text
