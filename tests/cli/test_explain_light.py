"""``membrane explain`` skips mounting MCP servers when none would be mounted: what it prints
then is exactly what the mounting path prints, for agents that name extensions and servers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from membrane.cli.app import main
from membrane.mcp import named as named_module
from membrane.mcp.named import mounts_servers

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workspace"

AGENTS = {
    # Names extensions (which are not MCP servers) by selector and by list.
    "noter": "tools: [Read, 'ext:notes']\nextensions: [notes, metrics]\n",
    # Names an MCP server that is not configured: a warning, its tools left out.
    "asker": "tools: [Read, 'mcp__docs__search']\n",
    # Names a server whose inline entry is switched off.
    "quiet": "tools: [Read]\nmcp_servers:\n  docs: null\n",
    # Names nothing at all.
    "plain": "tools: [Read, Grep]\n",
}


@pytest.fixture
def workspace(tmp_path: Path, isolated_home: Path) -> Path:
    folder = tmp_path / "workspace"
    shutil.copytree(EXAMPLE, folder)
    agents = folder / ".membrane" / "agents"
    for name, fields in AGENTS.items():
        (agents / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: The {name} agent.\n{fields}---\nWork.\n"
        )
    return folder


def explained(agent: str, workspace: Path, capsys: pytest.CaptureFixture[str]) -> object:
    assert main(["explain", agent, "--json", "--project", str(workspace)]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_the_light_path_prints_what_mounting_prints(
    agent: str,
    workspace: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    light = explained(agent, workspace, capsys)
    monkeypatch.setattr(named_module, "mounts_servers", lambda definition, configured: True)
    mounted = explained(agent, workspace, capsys)
    assert light == mounted
    assert isinstance(light, dict)
    assert "Read" in light["tools"]["callable"]


def test_only_a_configured_or_inline_server_is_mounted(workspace: Path) -> None:
    from membrane.workspace import Workspace

    ws = Workspace.open(workspace)
    definitions = ws.catalog.definitions()
    assert not any(mounts_servers(definitions[name], {}) for name in AGENTS)
    configured = {"docs": object()}
    assert mounts_servers(definitions["asker"], configured)  # type: ignore[arg-type]
    assert mounts_servers(definitions["noter"], configured)  # type: ignore[arg-type]
    assert not mounts_servers(definitions["plain"], configured)  # type: ignore[arg-type]
