"""A server's last tool list is cached: its names are known before it first starts, and the
cache gives way to what the server itself lists (or to changed settings)."""

from __future__ import annotations

import json

import anyio
import pytest

from membrane.cli.app import main
from membrane.errors import ToolNotVisible
from membrane.mcp import McpServers
from membrane.runtime import SubagentStartRequest
from membrane.runtime.request import validate_request
from membrane.tools.scope import Scope
from membrane.tools.spec import ToolContext
from membrane.workspace import Workspace

from .conftest import DYNAMIC, TIME_SERVER, McpProject

pytestmark = pytest.mark.anyio

NOW = "mcp__time__get_current_time"


async def test_cached_names_are_known_before_the_first_start_and_run_it_lazily(
    mcp_project: McpProject,
) -> None:
    mcp_project.server("time", TIME_SERVER)
    mcp_project.agent("clock", tools="Read, mcp__time__*")
    with anyio.fail_after(60):
        ws = Workspace.open(mcp_project.root, home=mcp_project.home)
        async with McpServers.of(ws) as servers:
            time = servers.servers["time"]
            assert time.tool_names() == frozenset()  # never listed: nothing known yet
            assert await servers.ensure(["time"]) == {}
        # A new host: the names are registered at mount, and nothing has started.
        ws = Workspace.open(mcp_project.root, home=mcp_project.home)
        async with McpServers.of(ws) as servers:
            time = servers.servers["time"]
            assert (time.state, time.starts, time.cached) == ("idle", 0, True)
            assert NOW in ws.registry.tools()
            # A tool filter naming it is valid before the server runs.
            request = SubagentStartRequest("clock", "x", tool_filter={"allow": [NOW]})
            validate_request(request, registry=ws.registry)
            # The first call starts the server; its own listing replaces the cached one.
            view = Scope(ws.registry, name="agent:t").view()
            answer = await view.call(NOW, {"timezone": "UTC"}, ToolContext())
            assert json.loads(getattr(answer, "text", ""))["timezone"] == "UTC"
            assert (time.state, time.starts, time.cached) == ("ready", 1, False)


def test_explain_and_mcp_list_show_cached_tools_without_starting_the_server(
    mcp_project: McpProject, capsys: pytest.CaptureFixture[str]
) -> None:
    mcp_project.server("time", TIME_SERVER)
    mcp_project.agent("clock", tools="Read, mcp__time__*")
    root = str(mcp_project.root)
    assert main(["mcp", "list", "--json", "--project", root]) == 0  # starts it: listed, cached
    assert NOW in json.loads(capsys.readouterr().out)["servers"][0]["tools"]
    log = mcp_project.home / "logs" / "mcp" / "time.log"
    log.unlink()
    assert main(["explain", "clock", "--project", root, "--json"]) == 0
    explained = json.loads(capsys.readouterr().out)
    assert NOW in json.dumps(explained["tools"])
    assert main(["mcp", "list", "--no-start", "--json", "--project", root]) == 0
    row = json.loads(capsys.readouterr().out)["servers"][0]
    assert (row["state"], row["cached"]) == ("idle", True)
    assert NOW in row["tools"]
    assert not log.exists()  # the server never ran for either


async def test_the_cache_gives_way_to_the_servers_listing_and_to_changed_settings(
    mcp_project: McpProject,
) -> None:
    mcp_project.server("dyn", DYNAMIC)
    with anyio.fail_after(60):
        ws = Workspace.open(mcp_project.root, home=mcp_project.home)
        async with McpServers.of(ws) as servers:
            await servers.ensure(["dyn"])
            view = Scope(ws.registry, name="agent:t").view()
            await view.call("mcp__dyn__add", {"name": "late"}, ToolContext())
            assert "mcp__dyn__late" in ws.registry.tools()  # list_changed: cached too
        ws = Workspace.open(mcp_project.root, home=mcp_project.home)
        async with McpServers.of(ws) as servers:
            assert "mcp__dyn__late" in ws.registry.tools()  # from the cache
            view = Scope(ws.registry, name="agent:t").view()
            # The fresh process does not have it: the call starts the server and is refused,
            # naming only the tool asked for.
            with pytest.raises(ToolNotVisible) as refused:
                await view.call("mcp__dyn__late", {"text": "hi"}, ToolContext())
            assert refused.value.data == {"name": "mcp__dyn__late"}
            assert "mcp__dyn__late" not in ws.registry.tools()
        ws = Workspace.open(mcp_project.root, home=mcp_project.home)
        async with McpServers.of(ws) as servers:
            names = ws.registry.names_of_origin("mcp:dyn")
            assert "mcp__dyn__add" in names and "mcp__dyn__late" not in names
        # Settings that reach another server (here its working folder) never read the old list.
        mcp_project.server("dyn", {**DYNAMIC, "cwd": str(mcp_project.root)})
        ws = Workspace.open(mcp_project.root, home=mcp_project.home)
        async with McpServers.of(ws) as servers:
            assert ws.registry.names_of_origin("mcp:dyn") == frozenset()
            assert servers.servers["dyn"].cached is False
