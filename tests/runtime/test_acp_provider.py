"""``AcpProvider`` with an echo agent built on the ACP SDK's agent API, as a real subprocess."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from membrane.agents.catalog import Catalog
from membrane.builtin_tools import register_builtin_tools
from membrane.config.values import McpServerSpec, Settings
from membrane.errors import UnsupportedCapability
from membrane.mcp import McpServers
from membrane.runtime import LifecycleEvent, RuntimeOptions, SubagentRuntime, SubagentStartRequest
from membrane.runtime.providers.acp import AcpProvider
from membrane.sandbox import SandboxPolicy, machine_support
from membrane.testing import MemoryStore
from membrane.tools.registry import ToolRegistry

pytestmark = pytest.mark.anyio

AGENT = Path(__file__).resolve().parent / "echo_acp_agent.py"
SETTINGS = Settings(max_depth="provider-managed")
#: These tests look at the agent through the client's services and count its processes by a
#: marker in the home folder, which an OS sandbox keeps out of its sight; the last test runs
#: the agent in the default sandbox.
NO_OS_SANDBOX = SandboxPolicy("guard")


def write_agent(root: Path, name: str, tools: str) -> None:
    path = root / ".membrane" / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\nname: {name}\ndescription: The {name} agent.\ntools: {tools}\n---\nWork.\n",
        encoding="utf-8",
    )


def runtime_for(
    root: Path,
    home: Path,
    marker: Path | None,
    *,
    settings: Settings = SETTINGS,
    registry: ToolRegistry | None = None,
    sandbox: SandboxPolicy = NO_OS_SANDBOX,
) -> SubagentRuntime:
    if registry is None:
        registry = ToolRegistry()
        register_builtin_tools(registry)
    provider = AcpProvider(
        [sys.executable, str(AGENT)],
        env={"ECHO_AGENT_MARKER": "" if marker is None else str(marker)},
        stderr_log=home / "acp.log",
        mcp_servers=settings.mcp_servers,
        sandbox=sandbox,
    )
    return SubagentRuntime(
        catalog=Catalog(project=root, home=home, settings=settings),
        registry=registry,
        provider=provider,
        store=MemoryStore(),
        options=RuntimeOptions(settings=settings, project=root),
    )


@pytest.fixture
def root(tmp_path: Path, isolated_home: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    return project


@pytest.mark.parametrize(
    "control",
    [{"tool_filter": {"allow": ["Read"]}}, {"persona": "You are terse."}, {"max_depth": 2}],
)
async def test_a_control_the_agent_cannot_enforce_is_refused_before_any_process(
    root: Path, isolated_home: Path, control: dict[str, object]
) -> None:
    write_agent(root, "echo", "Read")
    marker = isolated_home / "started"
    async with runtime_for(root, isolated_home, marker) as runtime:
        with pytest.raises(UnsupportedCapability) as caught:
            await runtime.start(SubagentStartRequest("echo", "hello", **control))  # type: ignore[arg-type]
        assert runtime.runs() == []
    assert caught.value.code == "unsupported-capability"
    assert not marker.exists()  # no agent process was started


async def test_the_agent_works_in_the_childs_checkout_through_the_childs_view(
    root: Path, isolated_home: Path
) -> None:
    write_agent(root, "echo", "Read, Write, Bash")
    marker = isolated_home / "started"
    events: list[LifecycleEvent] = []
    task = "hello\nread notes.txt\nwrite out.txt fresh text\nrun echo from-terminal"
    async with runtime_for(root, isolated_home, marker) as runtime, runtime.events() as stream:
        with anyio.fail_after(60):
            result = await runtime.run(SubagentStartRequest("echo", task, request_id="r1"))
            async for event in stream:
                events.append(event)
                if event.kind == "completed":
                    break
    assert result.status == "completed", result
    assert "echo: hello" in result.text
    assert f"(in {root})" in result.text  # the session was opened in the child's checkout
    assert "read -> alpha\nbeta" in result.text
    assert "write -> written" in result.text
    assert (root / "out.txt").read_text(encoding="utf-8") == "fresh text"
    assert "run -> exit 0: from-terminal" in result.text
    kinds = [event.kind for event in events]
    assert kinds.count("tool_call") == 4 and kinds.count("tool_result") == 4
    assert "agent_update" in kinds
    assert marker.read_text(encoding="utf-8").count("\n") == 1


async def test_the_agent_cannot_touch_what_the_child_could_not(
    root: Path, isolated_home: Path
) -> None:
    write_agent(root, "reader", "Read, Write")
    marker = isolated_home / "started"
    outside = root.parent / "outside.txt"
    task = (
        f"write {outside} escaped\n"
        "write .membrane/agents/evil.md planted\n"
        "run touch made-by-terminal\n"
        "read notes.txt"
    )
    async with runtime_for(root, isolated_home, marker) as runtime:
        with anyio.fail_after(60):
            result = await runtime.run(SubagentStartRequest("reader", task, request_id="r1"))
    assert result.status == "completed", result
    lines = result.text.splitlines()
    refusals = [line for line in lines if "refused" in line]
    assert len(refusals) == 3, result.text
    assert "path-outside-checkout" in refusals[0]
    assert "path-protected" in refusals[1]
    assert "tool-not-visible" in refusals[2]  # no Bash in this child's view
    assert "read -> alpha" in result.text
    assert not outside.exists()
    assert not (root / ".membrane" / "agents" / "evil.md").exists()
    assert not (root / "made-by-terminal").exists()


TIME = McpServerSpec(
    "time", command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC")
)


async def test_an_acp_child_gets_the_mcp_servers_its_view_holds_whole(
    root: Path, isolated_home: Path
) -> None:
    settings = Settings(max_depth="provider-managed", mcp_servers={"time": TIME})
    write_agent(root, "whole", "Read, mcp__time__*")
    write_agent(root, "part", "Read, mcp__time__get_current_time")
    write_agent(root, "most", "mcp__time__*\ndisallowed_tools: mcp__time__convert_time")
    write_agent(root, "plain", "Read")
    names = ("whole", "part", "most", "plain")
    registry = ToolRegistry()
    register_builtin_tools(registry)
    marker = isolated_home / "started"
    updates: dict[str, list[dict[str, object]]] = {}
    runtime = runtime_for(root, isolated_home, marker, settings=settings, registry=registry)
    async with (
        McpServers(settings.mcp_servers, registry) as servers,
        runtime,
        runtime.events() as stream,
    ):
        with anyio.fail_after(120):
            assert await servers.ensure(["time"]) == {}  # the host knows the server's tools
            results = {
                name: await runtime.run(SubagentStartRequest(name, "mcp", request_id=name))
                for name in names
            }
            seen = 0
            async for event in stream:
                if event.kind == "agent_update" and event.data.get("kind") == "mcp_servers":
                    updates.setdefault(event.agent, []).append(dict(event.data))
                seen += event.kind in ("completed", "error", "stopped")
                if seen == len(names):
                    break
    for result in results.values():
        assert result.status == "completed", result
    # The agent connected to the server itself and listed its tools.
    assert "mcp -> time: convert_time, get_current_time" in results["whole"].text
    assert updates["whole"] == [{"kind": "mcp_servers", "servers": ["time"], "left_out": {}}]
    # Only some of its tools are the child's, or none: the agent is not given the server.
    left_out = {"time": "the child's view does not hold every tool of this server"}
    for name in ("part", "most", "plain"):
        assert "mcp -> no servers" in results[name].text
        assert updates[name] == [{"kind": "mcp_servers", "servers": [], "left_out": left_out}]


async def test_a_server_whose_tools_are_not_known_is_not_given(
    root: Path, isolated_home: Path
) -> None:
    settings = Settings(max_depth="provider-managed", mcp_servers={"time": TIME})
    write_agent(root, "whole", "Read, mcp__time__*")
    marker = isolated_home / "m"
    async with runtime_for(root, isolated_home, marker, settings=settings) as runtime:
        with anyio.fail_after(60):
            result = await runtime.run(SubagentStartRequest("whole", "mcp", request_id="w"))
    assert result.status == "completed", result
    assert "mcp -> no servers" in result.text  # never listed here: what it holds is unchecked


async def test_an_isolated_acp_child_is_given_no_mcp_server(
    root: Path, isolated_home: Path
) -> None:
    settings = Settings(max_depth="provider-managed", mcp_servers={"time": TIME})
    write_agent(root, "loner", "Read, mcp__time__*\nisolated: true")
    async with runtime_for(root, isolated_home, isolated_home / "m", settings=settings) as rt:
        with anyio.fail_after(60):
            result = await rt.run(SubagentStartRequest("loner", "mcp", request_id="l"))
    assert result.status == "completed", result
    assert "mcp -> no servers" in result.text


@pytest.mark.parametrize("tools", ["Read", "Read, Write"])
async def test_the_agent_process_itself_is_sandboxed_by_default(
    root: Path, isolated_home: Path, outside_home: Path, tools: str
) -> None:
    support = machine_support()
    if support.bwrap is None and not support.landlock_abi:
        pytest.skip(f"no OS sandbox here: {support.bwrap_reason}; {support.landlock_reason}")
    write_agent(root, "direct", tools)
    (root / ".membrane" / "agents").mkdir(parents=True, exist_ok=True)
    # The write it may do is in a folder of the checkout: under Landlock (the sandbox where no
    # bwrap is) nothing new can be made at the checkout's top level.
    (root / "out").mkdir()
    escape = outside_home / "escaped.txt"
    task = f"touch {escape}\ntouch .membrane/agents/evil.md\ntouch out/inside.txt"
    runtime = runtime_for(root, isolated_home, None, sandbox=SandboxPolicy())
    async with runtime, runtime.events() as events:
        with anyio.fail_after(60):
            result = await runtime.run(SubagentStartRequest("direct", task, request_id="d1"))
            async for event in events:
                if event.kind == "published":
                    boundary = event.data["sandbox"]
                    break
    assert result.status == "completed", result
    assert boundary["backend"] == support.strongest and boundary["confined"] is True
    assert not escape.exists()
    assert not (root / ".membrane" / "agents" / "evil.md").exists()
    assert (root / "out" / "inside.txt").exists() is (tools == "Read, Write")
