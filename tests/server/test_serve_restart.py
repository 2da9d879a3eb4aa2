"""A runtime-backed command asking for a role: the owner acts under it on the runtime that
answers, idle or with runs in flight, which is never restarted for it; only the owner may stop
the runtime (``runtime/shutdown``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, clean_env, make_project, owner, serve, stop

from membrane.errors import MembraneError
from membrane.server import Client

pytestmark = pytest.mark.anyio

PY = sys.executable


def _cli(socket: Path, home: Path, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "membrane", *args, "--project", str(project), "--socket", str(socket)],
        env=clean_env(home),
        capture_output=True,
        text=True,
        timeout=START_BOUND * 2,
    )


def _names(done: subprocess.CompletedProcess[str]) -> set[str]:
    assert done.returncode == 0, done.stderr
    return {a["name"] for a in json.loads(done.stdout)["actions"]}


async def test_the_owner_acts_under_the_role_it_names_on_the_runtime_that_answers(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = make_project(tmp_path / "project")
    script = tmp_path / "script.json"
    sleeper = {"tool_calls": [{"name": "Bash", "arguments": {"command": "sleep 600"}}]}
    script.write_text(json.dumps({"agents": {"reader": [sleeper, {"text": "done"}]}}))
    socket = tmp_path / "sock" / "m.sock"
    proc = serve(socket, home)
    try:
        # The owner without a role: its own authority, as a headless command.
        own = _names(_cli(socket, home, project, "actions", "list", "--json"))
        assert {"Bash", "Write", "Read"} <= own
        ops = _names(_cli(socket, home, project, "actions", "list", "--json", "--role", "ops"))
        assert ops == {"Read", "Glob", "Grep", "Write", "Bash"}
        with anyio.fail_after(START_BOUND):
            async with Client.connect(socket) as client:
                await client.request("initialize", {"identity": owner(home)})
                ids = {
                    "projectId": (await client.request("projects/add", {"root": str(project)}))[
                        "projectId"
                    ]
                }
                start = {**ids, "agent": "reader", "task": "wait", "model": f"scripted:{script}"}
                run_id = (await client.request("runs/start", start))["run"]["run_id"]
                # With a run in flight, another role is the command's own, at once.
                external = _cli(
                    socket, home, project, "actions", "list", "--json", "--role", "external"
                )
                assert _names(external) == {"Read", "Glob", "Grep"}
                # A caller that is not the owner cannot stop the runtime.
                async with Client.connect(socket) as stranger:
                    await stranger.request("initialize", {})
                    with pytest.raises(MembraneError) as refused:
                        await stranger.request("runtime/shutdown", {"requestedRole": "ops"})
                run = (await client.request("runs/get", {**ids, "runId": run_id}))["run"]
                assert run["status"] == "running"
                await client.request("runs/stop", {**ids, "runId": run_id})
        assert refused.value.code == "caller-refused"
        assert proc.poll() is None  # the same runtime all along
    finally:
        stop(proc)
