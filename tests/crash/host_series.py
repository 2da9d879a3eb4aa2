"""The in-process host's side of the kill series: the delegation in a forked process, killed
with SIGKILL just before its K-th ``COMMIT`` reaches SQLite, and its recovery.

``forked(folder, k)`` runs the delegation in ``folder`` (its own project, home and state file)
in a process forked after the imports (so each case is cheap) and returns its wait status; with
``k`` = 0 it runs to its end and writes how many commits it made. ``recover(folder)`` is what an
operator's next start does, with the real clock: a new runtime on the file (its sweep clears
what the dead process held at once), every unfinished run resumed, deepest first, and the lead
started again under its request id if none was published.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio

from membrane.runtime import (
    InProcessProvider,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.runtime.workspace import Workspace
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel

from . import delegation


def case(folder: Path) -> tuple[Path, Path, Path]:
    """The state file, project and home of the case in ``folder``."""
    project, home = folder / "project", folder / "home"
    home.mkdir(parents=True, exist_ok=True)
    delegation.write_project(project)
    return folder / "state.db", project, home


def runtime(folder: Path, store: SQLiteStore) -> SubagentRuntime:
    """The runtime ``SubagentRuntime.open`` builds for the case's project (its built-in
    tools), on ``store``."""
    _, project, home = case(folder)
    workspace = Workspace.open(project, home=home)
    provider = InProcessProvider(FunctionModel(delegation.answer))
    return SubagentRuntime.on_workspace(workspace, provider, store=store)


def lead_request() -> SubagentStartRequest:
    return SubagentStartRequest(
        "lead",
        "delegate the survey",
        request_id=delegation.LEAD_REQUEST,
        budget=dict(delegation.BUDGET),
    )


async def _main(folder: Path, kill_at: int) -> int:
    commits = 0

    def trace(statement: str) -> None:
        nonlocal commits
        if statement.strip().upper() == "COMMIT":
            commits += 1
            if commits == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    db, _, _ = case(folder)
    store = SQLiteStore(db, trace=trace)
    async with runtime(folder, store) as live:
        await live.run(lead_request())
    store.close()
    return commits


def forked(folder: Path, kill_at: int) -> int:
    """Run the case in ``folder`` in a forked process killed at commit ``kill_at``; its wait
    status (``kill_at`` 0: to its end, the commit count written to ``folder/commits``)."""
    case(folder)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            commits = anyio.run(_main, folder, kill_at)
            (folder / "commits").write_text(str(commits))
            code = 0
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1]


async def recover(folder: Path) -> None:
    """Bring the delegation in ``folder`` to its end (see the module docstring)."""
    db, _, _ = case(folder)
    store = SQLiteStore(db)
    try:
        async with runtime(folder, store) as live:
            for _ in range(6):
                sessions = store.list_sessions()
                if not any(h.agent == "lead" for h in sessions):
                    await live.run(lead_request())
                    continue
                left = [h for h in sessions if h.status in delegation.UNFINISHED]
                if not left:
                    return
                deepest = max(left, key=lambda h: h.delegation_depth)
                if deepest.session_id not in {info.run_id for info in live.runs()}:
                    await live.resume(deepest.session_id, "go on")
                await live.wait(deepest.session_id)
            raise AssertionError(f"{folder}: the delegation did not end after 6 recoveries")
    finally:
        store.close()
