"""A command child under the OS sandbox: it writes its checkout, never outside it nor a
control path, and nothing it starts outlives it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from membrane.config.values import Settings
from membrane.runtime import CommandProvider, SubagentStartRequest
from membrane.sandbox import SandboxPolicy, machine_support

from .conftest import Project

pytestmark = pytest.mark.anyio


@pytest.fixture
def outside(outside_home: Path) -> Path:
    return outside_home


async def test_a_sandboxed_command_child_writes_only_its_checkout(
    project: Project, outside: Path
) -> None:
    support = machine_support()
    if support.bwrap is None:
        pytest.skip(f"no bubblewrap sandbox here: {support.bwrap_reason}")
    (project.root / "src").mkdir()
    script = (
        f"echo x > {outside}/f; mkdir -p .agents/agents; echo x > .agents/agents/g.md; "
        "echo made > src/made.txt; echo finished"
    )
    provider = CommandProvider(["sh", "-c", "{task}"], sandbox=SandboxPolicy("bubblewrap"))
    project.agent("external")
    project.settings = Settings(max_depth="provider-managed")
    async with project.runtime(provider) as runtime:
        with anyio.fail_after(30):
            result = await runtime.run(SubagentStartRequest("external", script))
    assert result.status == "completed" and result.text.strip() == "finished"
    assert (project.root / "src" / "made.txt").read_text() == "made\n"
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert not (project.root / ".agents" / "agents").exists()
