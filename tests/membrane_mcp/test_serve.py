"""``membrane mcp serve`` as a real subprocess, driven by the official ``mcp`` client over stdio."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from membrane.cli.app import main
from membrane.config.values import McpServerSpec
from membrane.mcp import McpServers
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import ToolContext

from .conftest import DYNAMIC, TIME_SERVER, McpProject, toml_table

pytestmark = pytest.mark.anyio

CLI = "from membrane.cli.app import run; run()"


@asynccontextmanager
async def served(
    project: McpProject, *args: str, on_message: Any = None, client: str = "membrane-test"
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", CLI, "mcp", "serve", *args, "--project", str(project.root)],
        env={"MEMBRANE_HOME": str(project.home)},
    )
    log = (project.home / "serve.stderr").open("w", encoding="utf-8")
    with log:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(
                read,
                write,
                message_handler=on_message,
                client_info=Implementation(name=client, version="1"),
            ) as session,
        ):
            await session.initialize()
            yield session


def configure(project: McpProject, roles: str, **servers: dict[str, object]) -> None:
    config = project.root / ".membrane" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    tables = "".join(toml_table(name, entry) for name, entry in servers.items())
    config.write_text(tables + roles, encoding="utf-8")


async def test_the_client_gets_exactly_the_roles_tools_and_nothing_else_runs(
    mcp_project: McpProject,
) -> None:
    configure(
        mcp_project,
        '[roles.reader]\nallow = ["Read", "Grep", "mcp__time__get_current_time"]\n'
        "[roles.admin]\ndeny = []\n",
        time=TIME_SERVER,
    )
    (mcp_project.root / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    with anyio.fail_after(60):
        # The client calls itself "admin" and claims the role in _meta: nothing changes.
        async with served(mcp_project, "--role", "reader", client="admin") as session:
            listed = await session.list_tools()
            assert sorted(t.name for t in listed.tools) == [
                "Grep",
                "Read",
                "mcp__time__get_current_time",
            ]
            read = await session.call_tool("Read", {"file_path": "notes.txt"})
            assert not read.is_error
            assert "beta" in read.content[0].text  # type: ignore[union-attr]
            now = await session.call_tool("mcp__time__get_current_time", {"timezone": "UTC"})
            assert not now.is_error
            assert json.loads(now.content[0].text)["timezone"] == "UTC"  # type: ignore[union-attr]
            for name in ("Bash", "mcp__time__convert_time", "Write"):
                refused = await session.call_tool(
                    name,
                    {"command": "true"},
                    meta={"role": "admin"},  # type: ignore[arg-type]
                )
                assert refused.is_error
                error = json.loads(refused.content[0].text)["error"]  # type: ignore[union-attr]
                assert error["code"] == "tool-not-visible"
                assert "Read" not in error["message"]  # the refusal names only what was asked
            again = await session.list_tools()
            assert len(again.tools) == 3


async def test_the_client_hears_list_changed_when_the_view_changes(
    mcp_project: McpProject,
) -> None:
    configure(mcp_project, '[roles.ops]\ndeny = ["Bash", "Write", "Edit"]\n', dyn=DYNAMIC)
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    with anyio.fail_after(60):
        async with served(mcp_project, "--role", "ops", on_message=on_message) as session:
            before = {t.name for t in (await session.list_tools()).tools}
            assert "mcp__dyn__add" in before
            assert "Bash" not in before
            added = await session.call_tool("mcp__dyn__add", {"name": "late"})
            assert not added.is_error
            await changed.wait()
            after = {t.name for t in (await session.list_tools()).tools}
            assert after - before == {"mcp__dyn__late"}
            echoed = await session.call_tool("mcp__dyn__late", {"text": "hi"})
            assert echoed.content[0].text == "late:hi"  # type: ignore[union-attr]


async def test_an_agents_view_is_its_effective_authority(mcp_project: McpProject) -> None:
    configure(mcp_project, "", time=TIME_SERVER)
    mcp_project.agent("clock", tools="Read, mcp__time__get_current_time")
    with anyio.fail_after(60):
        async with served(mcp_project, "--agent", "clock") as session:
            names = sorted(t.name for t in (await session.list_tools()).tools)
    assert names == ["Read", "mcp__time__get_current_time"]


def test_serve_without_a_trusted_role_or_agent_is_refused(
    mcp_project: McpProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMBRANE_ROLE", raising=False)
    assert main(["mcp", "serve", "--project", str(mcp_project.root)]) == 2
    assert "invalid-request" in capsys.readouterr().err
    assert main(["mcp", "serve", "--role", "nobody", "--project", str(mcp_project.root)]) == 2
    assert "unknown role 'nobody'" in capsys.readouterr().err


def test_mcp_list_shows_each_server_its_state_and_tools(
    mcp_project: McpProject, capsys: pytest.CaptureFixture[str]
) -> None:
    configure(
        mcp_project,
        "",
        time=TIME_SERVER,
        broken={"command": str(Path("/nonexistent/server")), "startup_timeout": 5},
    )
    assert main(["mcp", "list", "--project", str(mcp_project.root), "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)["servers"]}
    assert rows["time"]["state"] == "ready"
    assert rows["time"]["tools"] == ["mcp__time__convert_time", "mcp__time__get_current_time"]
    assert rows["broken"]["state"] in ("backoff", "failed")
    assert rows["broken"]["tools"] == []
    assert rows["broken"]["reason"]


async def test_a_view_served_over_loopback_http_is_mountable_by_url(
    mcp_project: McpProject,
) -> None:
    """Only with the token printed at start, and from no foreign origin: another local user
    can reach a loopback port as well as the operator."""
    configure(mcp_project, '[roles.reader]\nallow = ["Read"]\n')
    (mcp_project.root / "notes.txt").write_text("over http\n", encoding="utf-8")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    argv = [sys.executable, "-c", CLI, "mcp", "serve", "--role", "reader", "--http", str(port)]
    process = await anyio.open_process(
        [*argv, "--project", str(mcp_project.root), "--json"],
        env={**os.environ, "MEMBRANE_HOME": str(mcp_project.home)},
    )
    try:
        with anyio.fail_after(60):
            assert process.stderr is not None
            told = b""
            while b'"listening"' not in told:  # warnings may come first
                told += await process.stderr.receive()
            while not told.endswith(b"\n"):
                told += await process.stderr.receive()
            (announced,) = [
                json.loads(line) for line in told.splitlines() if b'"listening"' in line
            ]
            assert announced["listening"] == url
            bearer = {"Authorization": f"Bearer {announced['token']}"}
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    await anyio.sleep(0.05)
            hello = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "stranger", "version": "1"},
                },
            }
            accept = {"Accept": "application/json, text/event-stream"}
            async with httpx2.AsyncClient() as raw:
                stranger = await raw.post(url, json=hello, headers=accept)
                forged = await raw.post(
                    url, json=hello, headers={**accept, "Authorization": "Bearer " + "x" * 43}
                )
                foreign = await raw.post(
                    url, json=hello, headers={**accept, **bearer, "Origin": "http://evil.test"}
                )
            assert (stranger.status_code, forged.status_code) == (401, 401)
            assert foreign.status_code == 403
            async with (
                httpx2.AsyncClient(headers=bearer) as authorized,
                streamable_http_client(url, http_client=authorized) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                assert [t.name for t in (await session.list_tools()).tools] == ["Read"]
            # Membrane mounting Membrane: the served view becomes a server named "up".
            registry = ToolRegistry()
            spec = McpServerSpec("up", url=url, headers=bearer)
            async with McpServers({"up": spec}, registry) as servers:
                assert await servers.ensure(["up"]) == {}
                assert sorted(registry.tools()) == ["mcp__up__Read"]
                view = Scope(registry, name="agent:x").view()
                read = await view.call("mcp__up__Read", {"file_path": "notes.txt"}, ToolContext())
                assert "over http" in getattr(read, "text", "")
    finally:
        process.terminate()
        with anyio.CancelScope(shield=True):
            await process.wait()


async def test_a_plan_deployment_caps_an_agents_served_view(mcp_project: McpProject) -> None:
    # The deployment's ceiling holds for an agent served over MCP as for any top-level start:
    # under plan, the writer's Write and Bash are not offered.
    configure(mcp_project, 'permission_mode = "plan"\n')
    mcp_project.agent("writer", tools="Read, Write, Bash")
    with anyio.fail_after(60):
        async with served(mcp_project, "--agent", "writer") as session:
            names = sorted(t.name for t in (await session.list_tools()).tools)
    assert names == ["Read"]
