"""``runs/start``'s ``permissionMode`` through a real ``membrane serve``: the mode holds the run
(and its tree) at most there, so ``plan`` keeps a writer from writing; a mode above the
settings' ``permission_mode`` is refused (a mode may only narrow), and so is a word that is no
mode."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, Running, owner

from membrane.errors import MembraneError
from membrane.json_types import JSONDict
from membrane.server import Client
from membrane.store import SQLiteStore

pytestmark = pytest.mark.anyio

WRITER = """\
---
name: writer
description: Writes a file.
tools: Read, Write
---
Write what you are asked to write.
"""


async def _run(client: Client, ids: dict[str, str], model: str, **extra: str) -> str:
    start = {**ids, "agent": "writer", "task": "write it", "model": model, **extra}
    run = (await client.request("runs/start", start))["run"]
    await client.request("runs/wait", {**ids, "runId": run["run_id"]})
    return str(run["run_id"])


def _published(state: Path, run_id: str) -> JSONDict:
    store = SQLiteStore(state)
    try:
        [event] = [e for e in store.events(session_id=run_id) if e.kind == "published"]
        return dict(event.data)
    finally:
        store.close()


async def test_a_permission_mode_narrows_a_served_run_and_never_widens_it(
    runtime: Running, tmp_path: Path
) -> None:
    socket, project = runtime.socket, runtime.project
    (project / ".membrane" / "agents" / "writer.md").write_text(WRITER)
    script = tmp_path / "writer.json"
    call = {"name": "Write", "arguments": {"file_path": "planned.txt", "content": "x\n"}}
    script.write_text(json.dumps({"agents": {"writer": [{"tool_calls": [call]}, {"text": "ok"}]}}))
    model = f"scripted:{script}"
    with anyio.fail_after(START_BOUND):
        async with Client.connect(socket) as client:
            await client.request("initialize", {"identity": owner(runtime.home)})
            reply = await client.request("projects/add", {"root": str(project)})
            ids = {"projectId": reply["projectId"]}
            planned = await _run(client, ids, model, permissionMode="Plan")
            wrote_in_plan = (project / "planned.txt").exists()
            with pytest.raises(MembraneError) as wider:
                await _run(client, ids, model, permissionMode="bypassPermissions")
            with pytest.raises(MembraneError) as unknown:
                await _run(client, ids, model, permissionMode="yolo")
            free = await _run(client, ids, model)
            listed = await client.request("runs/list", {**ids, "stored": True})

    state = Path(listed["state"])
    assert not wrote_in_plan  # plan mode: the writer's Write did not run
    assert _published(state, planned)["permission"] == {
        "value": "plan",
        "source": "ceiling:request:permissionMode",
    }
    assert wider.value.code == "caller-refused"
    assert "only narrow" in wider.value.message and "'default'" in wider.value.message
    assert unknown.value.code == "invalid-params"
    # Without a mode the settings' own (default) holds, and the same Write runs.
    assert _published(state, free)["permission"]["value"] == "default"
    assert (project / "planned.txt").exists()
