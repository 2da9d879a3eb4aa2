"""Per-child extension hooks: a child hears only the extensions it loaded, an isolated child
none, when run as ``membrane run`` runs it (every project extension's hooks given to the
provider, the runtime binding each child to its own)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from membrane.extensions.hooks import ExtensionHooks
from membrane.runtime import (
    InProcessProvider,
    RuntimeOptions,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.testing import ScriptedModel
from membrane.workspace import Workspace

#: ``{name}`` appends "<extension> <agent>" to ``<project>/hooks.log`` on every session_start.
RECORDING_EXTENSION = """\
from pathlib import Path

LOG = Path(__file__).resolve().parents[2] / "hooks.log"


def setup(ext):
    def started(event):
        with LOG.open("a", encoding="utf-8") as log:
            log.write(f"{name} {{event.agent}}\\n")

    ext.on("session_start", started)
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def root(tmp_path: Path, isolated_home: Path) -> Path:
    """A project with extensions ``a`` and ``b`` and three agents that bind them differently."""
    root = tmp_path / "project"
    for name in ("a", "b"):
        _write(
            root / ".membrane" / "extensions" / f"{name}.py", RECORDING_EXTENSION.format(name=name)
        )
    agents = {
        "only_a": "extensions: [a]",
        "loner": "isolated: true",
        "everyone": "tools: Read",
        "lead": "extensions: [b]\nallowed_subagents: [only_a]",
    }
    for agent, line in agents.items():
        text = f"---\nname: {agent}\ndescription: The {agent} agent.\n{line}\n---\nWork.\n"
        _write(root / ".membrane" / "agents" / f"{agent}.md", text)
    return root


async def _heard(
    root: Path, home: Path, agent: str, *, model: ScriptedModel | None = None
) -> list[str]:
    """Run ``agent`` once; the lines the extensions' session_start hooks logged for it."""
    ws = Workspace.open(root, home=home)
    model = model or ScriptedModel({"default": [{"text": "done"}]})
    hooks = ExtensionHooks.from_extensions(ws.extensions.values())
    runtime = SubagentRuntime(
        catalog=ws.catalog,
        registry=ws.registry,
        provider=InProcessProvider(model, hooks=hooks),
        options=RuntimeOptions(
            settings=ws.settings, project=ws.project, deployment=ws.deployment()
        ),
    )
    log = root / "hooks.log"
    log.unlink(missing_ok=True)
    with anyio.fail_after(30):
        async with runtime:
            result = await runtime.run(SubagentStartRequest(agent, "work"))
    assert result.status == "completed"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


@pytest.mark.anyio
async def test_a_child_hears_only_the_extensions_it_loaded(root: Path, isolated_home: Path) -> None:
    assert await _heard(root, isolated_home, "only_a") == ["a only_a"]


@pytest.mark.anyio
async def test_an_isolated_child_hears_no_extension(root: Path, isolated_home: Path) -> None:
    assert await _heard(root, isolated_home, "loner") == []


@pytest.mark.anyio
async def test_a_child_that_loads_every_extension_hears_each_in_order(
    root: Path, isolated_home: Path
) -> None:
    assert await _heard(root, isolated_home, "everyone") == ["a everyone", "b everyone"]


@pytest.mark.anyio
async def test_a_parent_and_its_child_each_hear_their_own_extensions(
    root: Path, isolated_home: Path
) -> None:
    delegate = {"name": "Task", "arguments": {"agent": "only_a", "task": "work"}}
    model = ScriptedModel(
        {
            "agents": {
                "lead": [{"tool_calls": [delegate]}, {"text": "done"}],
                "only_a": [{"text": "done"}],
            }
        }
    )
    assert await _heard(root, isolated_home, "lead", model=model) == ["b lead", "a only_a"]
    second = [r for r in model.requests if r.agent == "lead"][1]
    (delegated,) = [m for m in second.messages if m.role == "tool"]
    assert not delegated.is_error
