"""``AcpProvider`` with an echo agent built on the ACP SDK's agent API, as a real subprocess."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from membrane.agents.catalog import Catalog
from membrane.builtin_tools import register_builtin_tools
from membrane.config.values import Settings
from membrane.errors import UnsupportedCapability
from membrane.runtime import LifecycleEvent, RuntimeOptions, SubagentRuntime, SubagentStartRequest
from membrane.runtime.providers.acp import AcpProvider
from membrane.testing import MemoryStore
from membrane.tools.registry import ToolRegistry

pytestmark = pytest.mark.anyio

AGENT = Path(__file__).resolve().parent / "echo_acp_agent.py"
SETTINGS = Settings(max_depth="provider-managed")


def write_agent(root: Path, name: str, tools: str) -> None:
    path = root / ".membrane" / "agents" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\nname: {name}\ndescription: The {name} agent.\ntools: {tools}\n---\nWork.\n",
        encoding="utf-8",
    )


def runtime_for(root: Path, home: Path, marker: Path) -> SubagentRuntime:
    registry = ToolRegistry()
    register_builtin_tools(registry)
    provider = AcpProvider(
        [sys.executable, str(AGENT)],
        env={"ECHO_AGENT_MARKER": str(marker)},
        stderr_log=home / "acp.log",
    )
    return SubagentRuntime(
        catalog=Catalog(project=root, home=home, settings=SETTINGS),
        registry=registry,
        provider=provider,
        store=MemoryStore(),
        options=RuntimeOptions(settings=SETTINGS, project=root),
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
