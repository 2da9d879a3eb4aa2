"""The ``membrane serve`` side of the kill series: the delegation started over the socket, the
server killed with SIGKILL after a random delay, restarted, and the delegation recovered.

Each case has its own home, project and socket. ``baseline`` measures how long the delegation
takes on this machine, uncut; ``kill_once`` starts it, kills the server after a delay drawn
between 0 and 1.2 times that, so kills land anywhere from the request's arrival to after the
end, and ``recover`` restarts the server and, as the owner, starts the lead again under its
request id when none was published, then resumes each unfinished run, deepest first (the
restarted server's sweep marks the dead server's runs ``interrupted`` at once).
"""

from __future__ import annotations

import contextlib
import json
import random
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from membrane.errors import MembraneError
from membrane.server import Client
from membrane.store import SQLiteStore

from . import delegation

sys.path.insert(0, str(Path(__file__).parents[1] / "server"))
from server_support import START_BOUND, launch, owner, stop


def serve(socket: Path, home: Path) -> subprocess.Popen[str]:
    """``membrane serve`` once it listens; all it wrote to stderr if it exits first."""
    proc = launch(socket, home)
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + START_BOUND
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], deadline - time.monotonic())
        line = proc.stderr.readline() if ready else ""
        if not line:
            break
        if "listening on" in line:
            return proc
        lines.append(line)
    proc.kill()
    lines.append(proc.stderr.read())
    raise AssertionError(f"membrane serve did not start (exit {proc.wait()}): {''.join(lines)}")


@dataclass
class Case:
    folder: Path

    @property
    def home(self) -> Path:
        return self.folder / "home"

    @property
    def project(self) -> Path:
        return self.folder / "project"

    @property
    def socket(self) -> Path:
        return self.folder / "s" / "m.sock"

    @property
    def model(self) -> str:
        return f"scripted:{self.folder / 'script.json'}"

    def make(self) -> Case:
        self.home.mkdir(parents=True, exist_ok=True)
        delegation.write_project(self.project)
        (self.folder / "script.json").write_text(json.dumps(delegation.SCRIPT))
        return self


async def _session(case: Case, client: Client) -> tuple[str, Path]:
    await client.request("initialize", {"identity": owner(case.home)})
    added = await client.request("projects/add", {"root": str(case.project)})
    listed = await client.request("runs/list", {"projectId": added["projectId"], "stored": True})
    return added["projectId"], Path(listed["state"])


def _start(case: Case, project_id: str) -> dict[str, Any]:
    return {
        "projectId": project_id,
        "agent": "lead",
        "task": "delegate the survey",
        "requestId": delegation.LEAD_REQUEST,
        "model": case.model,
        "budget": dict(delegation.BUDGET),
    }


async def _run_lead(case: Case, client: Client, project_id: str) -> None:
    run = (await client.request("runs/start", _start(case, project_id)))["run"]
    await client.request("runs/wait", {"projectId": project_id, "runId": run["run_id"]})


def baseline(case: Case) -> float:
    """Seconds the uncut delegation takes through a fresh server."""
    proc = serve(case.socket, case.home)
    try:

        async def main() -> float:
            async with Client.connect(case.socket) as client:
                project_id, _ = await _session(case, client)
                began = time.monotonic()
                await _run_lead(case, client, project_id)
                return time.monotonic() - began

        return anyio.run(main)
    finally:
        stop(proc)


def kill_once(case: Case, delay: float) -> None:
    """Start the delegation and kill the server ``delay`` seconds after the request left."""
    proc = serve(case.socket, case.home)

    async def main() -> None:
        async with Client.connect(case.socket) as client:
            project_id, _ = await _session(case, client)
            async with anyio.create_task_group() as group:

                async def run() -> None:
                    # The server dies under the request.
                    with contextlib.suppress(MembraneError, OSError, anyio.BrokenResourceError):
                        await _run_lead(case, client, project_id)

                group.start_soon(run)
                await anyio.sleep(delay)  # the random kill point
                proc.kill()
                await anyio.to_thread.run_sync(proc.wait)
                group.cancel_scope.cancel()

    try:
        anyio.run(main)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def recover(case: Case) -> Path:
    """Restart the server and bring the delegation to its end; the state file."""
    proc = serve(case.socket, case.home)
    try:

        async def main() -> Path:
            with anyio.fail_after(300):
                return await _recover(case)

        return anyio.run(main)
    finally:
        stop(proc)


async def _recover(case: Case) -> Path:
    async with Client.connect(case.socket) as client:
        project_id, state = await _session(case, client)
        ids = {"projectId": project_id}
        # A run the dead server left ``running`` turns ``interrupted`` once the new
        # server's first sweep has run; until then a wait returns it as it is.
        for _ in range(50):
            with SQLiteStore(state) as store:
                sessions = store.list_sessions()
            if not any(h.agent == "lead" for h in sessions):
                await _run_lead(case, client, project_id)
                continue
            left = [h for h in sessions if h.status in delegation.UNFINISHED]
            if not left:
                return state
            deepest = max(left, key=lambda h: h.delegation_depth)
            run = {**ids, "runId": deepest.session_id}
            if deepest.status != "running":
                resume = {**run, "message": "go on", "model": case.model}
                await client.request("runs/resume", resume)
            await client.request("runs/wait", run)
        raise AssertionError(f"{case.folder}: the delegation did not end")


def draw(rng: random.Random, span: float) -> float:
    return rng.uniform(0.0, 1.2 * span)
