"""``session_start`` says ``resumed`` only for a run that ``SubagentRuntime.resume`` continues:
a fork-mode child that starts from a copy of its parent's conversation is a fresh start."""

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
from membrane.store import SQLiteStore
from membrane.testing import ScriptedModel
from membrane.workspace import Workspace

pytestmark = pytest.mark.anyio

#: Appends "<agent> <resumed>" to ``<project>/starts.log`` on every session_start.
RECORDING_EXTENSION = """\
from pathlib import Path

LOG = Path(__file__).resolve().parents[2] / "starts.log"


def setup(ext):
    def started(event):
        with LOG.open("a", encoding="utf-8") as log:
            log.write(f"{event.agent} {event.resumed}\\n")

    ext.on("session_start", started)
"""


@pytest.fixture
def root(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "project"
    extension = root / ".membrane" / "extensions" / "recorder.py"
    extension.parent.mkdir(parents=True)
    extension.write_text(RECORDING_EXTENSION, encoding="utf-8")
    agents = root / ".membrane" / "agents"
    agents.mkdir()
    for name, extra in (("lead", "allowed_subagents: [worker]\n"), ("worker", "")):
        agents.joinpath(f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: The {name} agent.\nextensions: [recorder]\n"
            f"{extra}---\nWork.\n",
            encoding="utf-8",
        )
    return root


def _runtime(root: Path, home: Path, model: ScriptedModel, store: SQLiteStore) -> SubagentRuntime:
    ws = Workspace.open(root, home=home)
    hooks = ExtensionHooks.from_extensions(ws.extensions.values())
    return SubagentRuntime(
        catalog=ws.catalog,
        registry=ws.registry,
        provider=InProcessProvider(model, mode="fork", hooks=hooks),
        store=store,
        options=RuntimeOptions(
            settings=ws.settings, project=ws.project, deployment=ws.deployment()
        ),
    )


async def test_a_forked_child_is_a_fresh_start_and_only_a_resume_is_resumed(
    root: Path, isolated_home: Path, tmp_path: Path
) -> None:
    delegate = {"name": "Task", "arguments": {"agent": "worker", "task": "work"}}
    model = ScriptedModel(
        {
            "agents": {
                "lead": [{"tool_calls": [delegate]}, {"text": "done"}],
                "worker": [{"text": "worked"}, {"text": "worked again"}],
            }
        }
    )
    store = SQLiteStore(tmp_path / "state.db")
    with anyio.fail_after(30):
        async with _runtime(root, isolated_home, model, store) as runtime:
            assert (await runtime.run(SubagentStartRequest("lead", "go"))).status == "completed"
            [worker] = [info for info in runtime.runs() if info.agent == "worker"]
        # The forked worker did start from a copy of the lead's conversation.
        first = next(r for r in model.requests if r.agent == "worker")
        assert [m.content for m in first.messages if m.role == "user"] == ["go", "work"]
        async with _runtime(root, isolated_home, model, store) as runtime:
            await runtime.resume(worker.run_id, "once more")
            assert (await runtime.wait(worker.run_id)).text == "worked again"
    log = (root / "starts.log").read_text(encoding="utf-8").splitlines()
    assert log == ["lead False", "worker False", "worker True"]
    store.close()
