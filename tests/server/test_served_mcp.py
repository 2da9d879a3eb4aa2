"""A real ``membrane serve`` mounts the project's MCP servers: its runs and callers reach them."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, make_project, register, serve, stop

from membrane.server import Client

pytestmark = pytest.mark.anyio

NOW = "mcp__time__get_current_time"
CONFIG = f"""\
[roles.external]
allow = ["Read", "{NOW}"]

[mcp_servers.time]
command = {json.dumps(sys.executable)}
args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
"""
CLOCK = """\
---
name: clock
description: Tells the time.
tools: Read, mcp__time__*
---
Tell the time.
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    base = tmp_path_factory.mktemp("mcp")
    home = base / "home"
    home.mkdir()
    project = make_project(base / "project")
    (project / ".membrane" / "config.toml").write_text(CONFIG)
    (project / ".membrane" / "agents" / "clock.md").write_text(CLOCK)
    socket = base / "sock" / "m.sock"
    proc = serve(socket, home)
    try:
        register(socket, home, project)
        yield socket, project
    finally:
        stop(proc)


async def test_a_served_run_and_a_caller_reach_the_mounted_server(
    served: tuple[Path, Path], tmp_path: Path
) -> None:
    socket, project = served
    script = tmp_path / "script.yaml"
    call = {"name": NOW, "arguments": {"timezone": "UTC"}}
    script.write_text(json.dumps({"agents": {"clock": [{"tool_calls": [call]}, {"text": "ok"}]}}))
    results: list[dict[str, object]] = []
    with anyio.fail_after(START_BOUND * 2):
        async with Client.connect(socket) as client:
            await client.request("initialize", {"identity": {}})
            ids = {
                "projectId": (await client.request("projects/add", {"root": str(project)}))[
                    "projectId"
                ]
            }
            await client.request("events/subscribe", ids)
            start = {**ids, "agent": "clock", "task": "time?", "model": f"scripted:{script}"}
            run = (await client.request("runs/start", {**start, "background": True}))["run"]
            async for note in client.notifications:
                event = note.params["event"]
                if event["run_id"] != run["run_id"]:
                    continue
                if event["kind"] == "tool_result":
                    results.append(event["data"])
                if event["kind"] in ("completed", "error", "stopped"):
                    assert event["kind"] == "completed", event
                    break
            # A caller whose role allows the tool calls it through its own view.
            direct = await client.request(
                "actions/call", {**ids, "name": NOW, "arguments": {"timezone": "UTC"}}
            )
    assert [(r["name"], r["is_error"]) for r in results] == [(NOW, False)]
    # An MCP result keeps its parts on the wire: the text, the structured content.
    assert json.loads(direct["result"]["text"])["timezone"] == "UTC"
    assert direct["result"]["structured"]["timezone"] == "UTC"
    assert direct["result"]["attachments"] == []
