"""A served project prunes its store by its ``[retention]`` settings: at open and then every
``interval_seconds``, keeping what the settings keep."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from membrane.runtime import SubagentStartRequest
from membrane.server.host import ProjectHost
from membrane.server.identity import Caller, TokenBook
from membrane.testing import ScriptedModel
from membrane.workspace import Workspace

pytestmark = pytest.mark.anyio


async def test_a_served_project_prunes_finished_runs_beyond_its_retention(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = tmp_path / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "worker.md").write_text("---\nname: worker\n---\nGo.\n", encoding="utf-8")
    (project / ".membrane" / "config.toml").write_text(
        "[retention]\nkeep_runs = 1\ninterval_seconds = 0.1\n", encoding="utf-8"
    )
    workspace = Workspace.open(project, home=isolated_home)
    model = ScriptedModel("default:\n  - text: done\n")
    host = ProjectHost(
        workspace, tokens=TokenBook(), models=lambda spec, settings: model, child_env={}
    )
    async with anyio.create_task_group() as group:
        await group.start(host.run)
        done = []
        for i in range(3):
            started = await host.start(
                Caller(role=None, owner=True),
                SubagentStartRequest("worker", f"job {i}"),
                model=None,
            )
            await host.runtime.wait(started.run_id)
            done.append(started.run_id)
        with anyio.fail_after(20):
            while len(host.store.list_sessions()) > 1:
                await anyio.sleep(0.05)
        kept = [header.session_id for header in host.store.list_sessions()]
        pruned = host.pruned
        await host.close()
        group.cancel_scope.cancel()
    assert kept == done[-1:]
    assert pruned is not None and host.prune_error is None
