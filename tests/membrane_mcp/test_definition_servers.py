"""A definition's own ``mcp_servers:`` (names from the settings, or inline entries, as Claude
Code's ``mcpServers``)."""

from __future__ import annotations

import json
import sys

import anyio
import pytest

from membrane.agents import parse_definition
from membrane.agents.definition import UNSET
from membrane.cli.app import main
from membrane.errors import DefinitionError
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest

from .conftest import DYNAMIC_SERVER, TIME_SERVER, McpProject, last_tool_result

pytestmark = pytest.mark.anyio

INLINE = f"""---
name: builder
description: Uses its own server.
tools: Read
mcpServers:
  - dyn:
      command: {json.dumps(sys.executable)}
      args: [{json.dumps(str(DYNAMIC_SERVER))}]
---
Build.
"""


def test_names_and_inline_entries_are_read_and_a_bad_entry_is_refused() -> None:
    definition = parse_definition(INLINE, path="builder.md", root="project")
    assert definition.mcp_servers is not UNSET
    servers = dict(definition.mcp_servers)
    assert servers["dyn"] is not None
    assert servers["dyn"].command == sys.executable
    named = parse_definition(
        "---\nname: a\ndescription: b\nmcp_servers: time, git\n---\n", path="a.md", root="project"
    )
    assert dict(named.mcp_servers) == {"time": None, "git": None}  # type: ignore[arg-type]
    bad = "---\nname: a\ndescription: b\nmcp_servers:\n  - web: {url: 'ftp://x'}\n---\n"
    with pytest.raises(DefinitionError) as caught:
        parse_definition(bad, path="a.md", root="project")
    assert caught.value.code == "definition-invalid"
    assert "mcp_servers" in caught.value.message


async def test_an_inline_server_is_mounted_for_the_child_that_names_it(
    mcp_project: McpProject,
) -> None:
    path = mcp_project.root / ".membrane" / "agents" / "builder.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(INLINE, encoding="utf-8")
    offered: list[set[str]] = []
    requests: list[ModelRequest] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        offered.append({t["name"] for t in request.tools})
        requests.append(request)
        if len(offered) == 1:
            return ModelResponse(tool_calls=(ToolCall("c1", "mcp__dyn__add", {"name": "x"}),))
        return ModelResponse(text="built")

    async with mcp_project.runtime(answer) as (runtime, _servers):
        with anyio.fail_after(60):
            result = await runtime.run(SubagentStartRequest("builder", "go", request_id="r1"))
    assert result.status == "completed", result
    assert {"Read", "mcp__dyn__add", "mcp__dyn__remove"} <= offered[0]
    assert last_tool_result(requests[1]).content == "added x"


def test_a_named_server_reaches_explain_and_an_unconfigured_name_is_warned(
    mcp_project: McpProject, capsys: pytest.CaptureFixture[str]
) -> None:
    mcp_project.server("time", TIME_SERVER)
    mcp_project.agent("clock", tools="Read", mcp_servers="[time, github]")
    assert main(["explain", "clock", "--project", str(mcp_project.root), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "mcp__time__get_current_time" in out["tools"]["callable"]
    assert out["tools"]["left_out"]["mcp__github__*"] == "no such MCP server"
    assert "time" in out["extensions"]["loaded"]
