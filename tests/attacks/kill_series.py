"""One delegation, killed with SIGKILL at its K-th committed write; and the model that drives it.

Usage: kill_series.py FOLDER

A ``lead`` starts a ``worker`` in the background with ``Task`` and waits for it with
``TaskWait``; the worker calls ``Read`` and forges calls to ``Secret`` (a host tool outside its
view, whose handler would create MARKER), ``secret`` and ``Bash``, then answers. With K = 0 the
run goes to its end; then, for K = 1, 2, ..., a fresh process (forked after the imports, so the
series is cheap) runs the same delegation in ``FOLDER/k<K>`` and kills itself with SIGKILL just
before its K-th ``COMMIT`` reaches SQLite: writes 1..K-1 are on disk and the K-th is not. The
series ends with the first K whose run commits fewer than K times and so ends by itself.

The kill points come from each run, not from a count taken once: how the lead and the worker
interleave (whether the worker's notice reaches the lead at a turn boundary or through its
``TaskWait``) is up to the scheduler, and a loaded machine may take another path with another
number of commits. The leases are long (no renewal or sweep falls inside a run, however slow),
so every commit is the delegation's own. The script prints one JSON list, an entry per K with
its folder and how the process ended. The test imports ``runtime`` and ``answer`` to recover
each delegation in another process.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from membrane.agents.catalog import Catalog
from membrane.config.values import Settings
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import (
    InProcessProvider,
    RuntimeOptions,
    SubagentRuntime,
    SubagentStartRequest,
)
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel
from membrane.tools.registry import ToolRegistry
from membrane.tools.spec import Tool, ToolContext

ANSWER = "the survey found 3 files"
LEAD_REQUEST = "kill-series-lead"
FORGED = ("Secret", "secret", "Bash")
#: Leases long enough that the sweeper's first pass (at the start) is its only one in a run.
SETTINGS = Settings(max_depth=1, lease_seconds=1800.0, sweep_interval_seconds=3600.0)
#: More kills than this and the delegation is not ending: the series stops there.
MAX_KILLS = 200


def registry(marker: Path) -> ToolRegistry:
    """``Read`` (the worker's one tool) and the hidden ``Secret``, which marks that it ran."""

    async def read(arguments: Mapping[str, Any], context: ToolContext) -> str:
        return "three files"

    async def secret(arguments: Mapping[str, Any], context: ToolContext) -> str:
        marker.write_text(f"Secret ran for {context.agent}\n")
        return "ran"

    tools = ToolRegistry()
    tools.register(Tool("Read", "Read.", {"type": "object"}, read))
    tools.register(Tool("Secret", "Deploy.", {"type": "object"}, secret, origin="host"))
    return tools


def agents(project: Path) -> None:
    folder = project / ".membrane" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lead.md").write_text(
        "---\nname: lead\ndescription: Leads.\ntools: Read\nallowed_subagents: [worker]\n---\nx\n"
    )
    (folder / "worker.md").write_text(
        "---\nname: worker\ndescription: Works.\ntools: Read\n---\nx\n"
    )


async def answer(request: ModelRequest) -> ModelResponse:
    """The lead and the worker, as a pure function of the conversation so far."""
    texts = [m.content for m in request.messages]
    tool_results = [m for m in request.messages if m.role == "tool"]
    if request.agent == "worker":
        if not tool_results:
            calls = [ToolCall("w-read", "Read", {})]
            calls += [ToolCall(f"w-{i}", name, {}) for i, name in enumerate(FORGED)]
            return ModelResponse(tool_calls=tuple(calls), stop_reason="tool_calls")
        return ModelResponse(text=ANSWER)
    if any(ANSWER in text for text in texts):
        return ModelResponse(text="done: " + ANSWER)
    started = [m for m in tool_results if '"run_id"' in m.content and not m.is_error]
    if not started:
        start = {"agent": "worker", "task": "survey", "background": True}
        return ModelResponse(
            tool_calls=(ToolCall("l-task", "Task", start),), stop_reason="tool_calls"
        )
    worker = json.loads(started[0].content)["run_id"]
    waited = sum(1 for m in tool_results if m.tool_call_id.startswith("l-wait"))
    if waited >= 3:
        return ModelResponse(text="lost: no answer from the worker")
    wait = ToolCall(f"l-wait-{waited}", "TaskWait", {"ids": [worker], "timeout": 30})
    return ModelResponse(tool_calls=(wait,), stop_reason="tool_calls")


def runtime(project: Path, home: Path, store: SQLiteStore, marker: Path) -> SubagentRuntime:
    return SubagentRuntime(
        catalog=Catalog(project=project, home=home, settings=SETTINGS),
        registry=registry(marker),
        provider=InProcessProvider(FunctionModel(answer)),
        store=store,
        options=RuntimeOptions(settings=SETTINGS, project=project),
    )


def case(folder: Path) -> tuple[Path, Path, Path, Path]:
    """The state file, project, home and marker of one case in ``folder``."""
    project, home = folder / "project", folder / "home"
    for path in (project, home):
        path.mkdir(parents=True, exist_ok=True)
    agents(project)
    return folder / "state.db", project, home, folder / "marker"


async def main(folder: Path, kill_at: int) -> int:
    """Run the delegation in ``folder``; the number of transactions it committed."""
    commits = 0

    def trace(statement: str) -> None:
        nonlocal commits
        if statement.strip().upper() == "COMMIT":
            commits += 1
            if commits == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    db, project, home, marker = case(folder)
    store = SQLiteStore(db, trace=trace)
    async with runtime(project, home, store, marker) as live:
        await live.run(SubagentStartRequest("lead", "delegate the survey", request_id=LEAD_REQUEST))
    store.close()
    return commits


def forked(folder: Path, kill_at: int) -> int:
    """Run one case in a forked process; its wait status."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            commits = anyio.run(main, folder, kill_at)
            (folder / "commits").write_text(str(commits))
            code = 0
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1]


def series(base: Path) -> list[dict[str, object]]:
    status = forked(base / "k0", 0)
    if status != 0:
        raise SystemExit(f"the delegation did not run to its end (wait status {status})")
    cases: list[dict[str, object]] = [{"k": 0, "folder": str(base / "k0"), "signal": 0}]
    for kill_at in range(1, MAX_KILLS + 1):
        folder = base / f"k{kill_at}"
        status = forked(folder, kill_at)
        killed = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        cases.append({"k": kill_at, "folder": str(folder), "signal": killed})
        if not killed:
            break  # this run committed fewer than kill_at times: every write point was hit
    return cases


if __name__ == "__main__":
    print(json.dumps(series(Path(sys.argv[1]))), flush=True)
