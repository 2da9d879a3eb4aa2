"""A runtime-backed command asking for another role than the runtime's: an idle runtime is
restarted under it; with runs in flight the command fails with ``runtime-role-mismatch``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, clean_env, make_project, serve, stop

from membrane.errors import RuntimeRoleMismatch
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


async def _info(socket: Path) -> dict[str, object]:
    async with Client.connect(socket) as client:
        info = await client.request("initialize", {})
    return dict(info["runtimeInfo"])


async def test_an_idle_runtime_of_another_role_is_restarted_under_the_asked_one(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = make_project(tmp_path / "project")
    socket = tmp_path / "sock" / "m.sock"
    first = serve(socket, home)  # default role: external
    try:
        done = _cli(socket, home, project, "actions", "list", "--json", "--role", "ops")
        assert done.returncode == 0, done.stderr
        names = [a["name"] for a in json.loads(done.stdout)["actions"]]
        # The ops role's tools, which the external role does not have.
        assert {"Bash", "Write"} <= set(names)
        # The stale runtime drained and exited; a new one answers under the asked role.
        assert first.wait(timeout=START_BOUND) == 0
        with anyio.fail_after(START_BOUND):
            info = await _info(socket)
        assert info["defaultRole"] == "ops"
        assert info["pid"] != first.pid
    finally:
        stop(first)
        with anyio.fail_after(START_BOUND):
            try:
                pid = int(str((await _info(socket))["pid"]))
            except Exception:
                pid = 0
        if pid:
            os.kill(pid, signal.SIGTERM)


async def test_a_runtime_with_runs_in_flight_is_not_restarted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = make_project(tmp_path / "project")
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "agents": {
                    "reader": [
                        {"tool_calls": [{"name": "Bash", "arguments": {"command": "sleep 600"}}]},
                        {"text": "done"},
                    ]
                }
            }
        )
    )
    socket = tmp_path / "sock" / "m.sock"
    proc = serve(socket, home, "--role", "ops")
    try:
        with anyio.fail_after(START_BOUND):
            async with Client.connect(socket) as client:
                await client.request("initialize", {})
                ids = {
                    "projectId": (await client.request("projects/add", {"root": str(project)}))[
                        "projectId"
                    ]
                }
                started = await client.request(
                    "runs/start",
                    {**ids, "agent": "reader", "task": "wait", "model": f"scripted:{script}"},
                )
                run_id = started["run"]["run_id"]
                done = _cli(socket, home, project, "actions", "list", "--role", "external")
                # The runtime is still the same one, and the run goes on.
                assert proc.poll() is None
                run = (await client.request("runs/get", {**ids, "runId": run_id}))["run"]
                assert run["status"] == "running"
                await client.request("runs/stop", {**ids, "runId": run_id})
        assert done.returncode == 3
        assert done.stderr.startswith(f"{RuntimeRoleMismatch.code}:"), done.stderr
        assert "'ops'" in done.stderr and "'external'" in done.stderr
    finally:
        stop(proc)
