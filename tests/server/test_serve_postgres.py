"""``membrane serve`` with ``MEMBRANE_STATE_URL``: a real server process keeps a delegation's
runs in the PostgreSQL database (the session's private cluster) and lists them from there."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, clean_env, owner, serve, stop

from membrane.lowlevel import PostgresStore
from membrane.server import Client

pytestmark = pytest.mark.anyio

AGENT = "---\nname: {name}\ndescription: The {name} agent.\n{extra}---\nDo the task.\n"
SCRIPT = """\
agents:
  lead:
    - tool_calls:
        - name: Task
          arguments: {agent: helper, task: Count the files.}
    - text: The helper counted them.
  helper:
    - text: three files
"""


async def test_a_served_delegation_is_stored_and_listed_in_the_database(
    tmp_path: Path, postgres_url: str
) -> None:
    project = tmp_path / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "lead.md").write_text(
        AGENT.format(name="lead", extra="allowed_subagents: [helper]\n")
    )
    (agents / "helper.md").write_text(AGENT.format(name="helper", extra=""))
    script = tmp_path / "script.yaml"
    script.write_text(SCRIPT)
    home = tmp_path / "home"
    home.mkdir()
    socket = tmp_path / "sock" / "m.sock"
    proc = serve(socket, home, env=clean_env(home, MEMBRANE_STATE_URL=postgres_url))
    try:
        with anyio.fail_after(START_BOUND):
            async with Client.connect(socket) as client:
                await client.request("initialize", {"identity": owner(home)})
                added = await client.request("projects/add", {"root": str(project)})
                ids = {"projectId": added["projectId"]}
                start = {**ids, "agent": "lead", "task": "Count.", "model": f"scripted:{script}"}
                run = (await client.request("runs/start", start))["run"]
                done = (await client.request("runs/wait", {**ids, "runId": run["run_id"]}))["run"]
                listed = await client.request("runs/list", {**ids, "stored": True})
    finally:
        stop(proc)
    assert done["status"] == "completed"
    assert listed["state"] == postgres_url
    rows = {row["agent"]: row for row in listed["runs"]}
    assert set(rows) == {"lead", "helper"}
    assert rows["helper"]["parent_id"] == run["run_id"] and rows["helper"]["depth"] == 1
    with PostgresStore(postgres_url) as store:
        assert {h.agent: h.status for h in store.list_sessions()} == {
            "lead": "completed",
            "helper": "completed",
        }
