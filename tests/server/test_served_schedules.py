"""A served project fires its due schedules: a definition's own ``schedule:`` is registered and a
due schedule starts its agent, once, with the request id derived from its due time."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from membrane.durable.schedules import ScheduleBook
from membrane.server.host import ProjectHost
from membrane.server.identity import TokenBook
from membrane.testing import ScriptedModel
from membrane.workspace import Workspace

pytestmark = pytest.mark.anyio


async def test_a_served_project_fires_a_due_schedule_once(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = tmp_path / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "lead.md").write_text("---\nname: lead\n---\nGo.\n", encoding="utf-8")
    (agents / "nightly.md").write_text(
        "---\nname: nightly\nschedule: '0 3 * * *'\n---\nCheck.\n", encoding="utf-8"
    )
    workspace = Workspace.open(project, home=isolated_home)
    model = ScriptedModel("default:\n  - text: done\n")
    host = ProjectHost(
        workspace, tokens=TokenBook(), models=lambda spec, settings: model, child_env={}
    )
    assert "schedule_agent" in workspace.registry.tools()
    async with anyio.create_task_group() as group:
        await group.start(host.run)
        book = ScheduleBook(host.store)
        made = host.schedules.add("lead", "scheduled work", delay_seconds="0.2")
        with anyio.fail_after(20):
            while book.get(made.schedule_id).last is None:
                await anyio.sleep(0.05)
        last = book.get(made.schedule_id).last
        nightly = book.get("agent:nightly")
        sessions = host.store.list_sessions()
        await host.close()
        group.cancel_scope.cancel()
    assert last is not None and last["status"] == "fired", last
    assert str(last["request_id"]).startswith(f"schedule:{made.schedule_id}:")
    assert [s.session_id for s in sessions] == [last["run_id"]]
    assert sessions[0].agent == "lead"
    assert nightly.cron == "0 3 * * *" and nightly.next_due is not None
