"""The CLI checks that the runtime answering it is its own build (seed 002's runtime contract):
a runtime of another build (here: a copy of the sources with one file more, as an upgrade
leaves behind) is stopped and replaced when it is idle, and named with
``runtime-build-mismatch`` while it has runs in flight, never used as is."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, clean_env, make_project, owner, serve, stop

import membrane
from membrane.server import Client
from membrane.server.server import build_hash

pytestmark = pytest.mark.anyio


def _cli(socket: Path, home: Path, project: Path) -> subprocess.CompletedProcess[str]:
    where = ["--project", str(project), "--socket", str(socket)]
    return subprocess.run(
        [sys.executable, "-m", "membrane", "actions", "list", "--json", *where],
        env=clean_env(home, MEMBRANE_IDLE_EXIT="120"),
        capture_output=True,
        text=True,
        timeout=START_BOUND * 2,
    )


async def _info(socket: Path, home: Path) -> dict[str, object]:
    async with Client.connect(socket) as client:
        reply = await client.request("initialize", {"identity": owner(home)})
    info: dict[str, object] = reply["runtimeInfo"]
    return info


async def test_a_runtime_of_another_build_is_replaced_when_idle_and_named_while_busy(
    tmp_path: Path,
) -> None:
    other = tmp_path / "other-build"
    shutil.copytree(
        Path(membrane.__file__).parent,
        other / "membrane",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (other / "membrane" / "_upgrade_note.py").write_text('"""A file the other build has."""\n')
    home = tmp_path / "home"
    home.mkdir()
    project = make_project(tmp_path / "project")
    script = tmp_path / "script.json"
    sleeper = {"tool_calls": [{"name": "Bash", "arguments": {"command": "sleep 600"}}]}
    script.write_text(json.dumps({"agents": {"reader": [sleeper, {"text": "done"}]}}))
    socket = tmp_path / "sock" / "m.sock"
    stale = serve(socket, home, env=clean_env(home, PYTHONPATH=str(other)))
    fresh_pid = 0
    try:
        with anyio.fail_after(START_BOUND * 3):
            info = await _info(socket, home)
            assert info["pid"] == stale.pid and info["buildHash"] != build_hash()
            async with Client.connect(socket) as client:
                await client.request("initialize", {"identity": owner(home)})
                added = await client.request("projects/add", {"root": str(project)})
                ids = {"projectId": added["projectId"]}
                start = {**ids, "agent": "reader", "task": "wait", "model": f"scripted:{script}"}
                run_id = (await client.request("runs/start", start))["run"]["run_id"]
                # Busy: the command is refused, naming the mismatch; the runtime goes on.
                busy = await anyio.to_thread.run_sync(_cli, socket, home, project)
                assert busy.returncode != 0 and "runtime-build-mismatch" in busy.stderr
                assert stale.poll() is None
                await client.request("runs/stop", {**ids, "runId": run_id})
                await client.request("runs/wait", {**ids, "runId": run_id})
            # Idle: stopped and replaced by a runtime of the command's own build.
            idle = await anyio.to_thread.run_sync(_cli, socket, home, project)
            assert idle.returncode == 0, idle.stderr
            assert "Read" in {a["name"] for a in json.loads(idle.stdout)["actions"]}
            assert await anyio.to_thread.run_sync(stale.wait) == 0
            info = await _info(socket, home)
            fresh_pid = int(str(info["pid"]))
            assert fresh_pid != stale.pid and info["buildHash"] == build_hash()
    finally:
        stop(stale)
        if fresh_pid:
            os.kill(fresh_pid, signal.SIGTERM)
