"""OpenAI's strict mode (``strict_tools = true``): every tool goes out with ``strict: true`` and a
schema that mode accepts (every property required, the optional ones nullable), and the
``null`` a strict model writes for an optional argument reaches the tool as the argument left
out. Through the real ``openai`` SDK against the validating loopback server."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from wire_server import WireServer

from membrane import SubagentRuntime, SubagentStartRequest
from membrane.config.load import load_settings
from membrane.errors import SettingsError
from membrane.models.openai import OpenAIModel
from membrane.models.retry import RetryPolicy

pytestmark = pytest.mark.anyio

SECRET = "the stock count is 42"


async def _noop(seconds: float) -> None:
    return None


def _reader(agent: str, turn: int, body: Mapping[str, Any]) -> dict[str, Any]:
    if turn == 0:
        # What a strict-mode model must write: every argument, null for those it leaves out.
        arguments = {"file_path": "notes.txt", "offset": None, "limit": None}
        return {"tool_calls": [{"name": "Read", "arguments": arguments}]}
    return {"text": f"read: {body['messages'][-1]['content']}"}


def _strict_problems(tool: Mapping[str, Any], where: str) -> list[str]:
    """What OpenAI's strict mode refuses in one sent tool."""
    function = tool["function"]
    problems = [] if function.get("strict") is True else [f"{where}: strict is not true"]

    def walk(node: Mapping[str, Any], path: str) -> None:
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            if node.get("additionalProperties") is not False:
                problems.append(f"{path}: not closed")
            if sorted(node.get("required") or ()) != sorted(properties):
                problems.append(f"{path}: required {node.get('required')} != {list(properties)}")
            for name, child in properties.items():
                walk(child, f"{path}.{name}")
        for keyword in ("items", "additionalProperties"):
            if isinstance(node.get(keyword), Mapping):
                walk(node[keyword], f"{path}.{keyword}")
        for index, option in enumerate(node.get("anyOf") or ()):
            walk(option, f"{path}.anyOf[{index}]")

    walk(function["parameters"], f"{where}.parameters")
    return problems


@pytest.mark.parametrize("strict", [True, False])
async def test_strict_tools_go_out_in_strict_form_and_nulls_are_arguments_left_out(
    tmp_path: Path, isolated_home: Path, strict: bool
) -> None:
    project = tmp_path / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "reader.md").write_text(
        "---\nname: reader\ndescription: Reads.\ntools: Read, Grep, Glob\n---\nRead.\n"
    )
    (project / "notes.txt").write_text(SECRET + "\n")
    with WireServer(_reader, wire="openai", flavour="vllm") as server:
        model = OpenAIModel(
            "gpt-5-mini",
            base_url=server.url + "/v1",
            stream=False,
            retry=RetryPolicy(max_retries=0, sleep=_noop),
            strict_tools=strict,
        )
        try:
            with anyio.fail_after(60):
                async with SubagentRuntime.open(
                    project, model=model, state=tmp_path / "state.db"
                ) as runtime:
                    result = await runtime.run(SubagentStartRequest("reader", "Go."))
        finally:
            await model.aclose()
    assert server.refused == []
    tools = server.requests[0]["body"]["tools"]
    problems = [p for tool in tools for p in _strict_problems(tool, tool["function"]["name"])]
    if strict:
        assert problems == []
        # The read ran with offset and limit left out, not refused for a null integer.
        assert result.status == "completed" and SECRET in result.text, result.text
    else:
        assert problems  # the plain form keeps optional arguments optional
        assert "tool-arguments-invalid" in result.text


def test_strict_tools_on_an_entry_that_is_not_openai_is_refused(
    tmp_path: Path, isolated_home: Path
) -> None:
    config = tmp_path / ".membrane" / "config.toml"
    config.parent.mkdir()
    config.write_text(
        '[models.claude]\nprovider = "anthropic"\nmodel = "claude-sonnet-4-5"\n'
        "strict_tools = true\n"
    )
    with pytest.raises(SettingsError) as caught:
        load_settings(project=tmp_path, home=isolated_home)
    assert caught.value.data["key"] == "models.claude.strict_tools"
