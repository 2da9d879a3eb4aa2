"""A budget's remainder is durable: a run killed with SIGKILL on a real state file and resumed
by a later process goes on with what was left, never with a fresh budget."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane import InProcessProvider, RuntimeOptions, SubagentRuntime, Workspace
from membrane.store import SQLiteStore
from membrane.testing import ScriptedModel
from process_support import first_line_then_kill

SCRIPT = Path(__file__).parent / "scripts" / "spend_then_hang.py"
LIMIT = 1000
BEFORE_KILL = 6
#: Enough 100-token turns to spend the budget twice over, were it reset by the resume.
RESUMED = (
    "agents:\n  lead:\n"
    + (
        "    - tool_calls: [{name: Read, arguments: {file_path: notes.txt}}]\n"
        "      usage: {input_tokens: 70, output_tokens: 30}\n"
    )
    * 20
    + "    - text: done\n"
)


def _spend_then_kill(team: Path, state: Path) -> str:
    found = first_line_then_kill(SCRIPT, team, state, LIMIT, BEFORE_KILL, what="the run")
    return str(found["run_id"])


def _usage_events(state: Path, run_id: str) -> list[dict[str, Any]]:
    store = SQLiteStore(state)
    try:
        return [dict(e.data) for e in store.events(session_id=run_id) if e.kind == "usage"]
    finally:
        store.close()


@pytest.mark.anyio
async def test_a_kill_and_resume_does_not_reset_the_remainder(team: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    with anyio.fail_after(60):
        run_id = await anyio.to_thread.run_sync(lambda: _spend_then_kill(team, state))
    store = SQLiteStore(state)
    try:
        header = store.get_header(run_id)
        assert header is not None and header.status == "running"  # the kill left it running
        used = header.meta["budget"]["used"]
    finally:
        store.close()
    assert used["tokens"] == 100 * BEFORE_KILL and used["turns"] == BEFORE_KILL + 1
    before = len(_usage_events(state, run_id))

    # Opened with a clock past the killed process's lease, as a later process would find it.
    store = SQLiteStore(state, clock=lambda: time.time() + 3600)
    ws = Workspace.open(team)
    runtime = SubagentRuntime(
        catalog=ws.catalog,
        registry=ws.registry,
        provider=InProcessProvider(ScriptedModel(RESUMED)),
        store=store,
        options=RuntimeOptions(settings=ws.settings, project=ws.project),
    )
    with anyio.fail_after(60):
        async with runtime:
            info = await runtime.resume(run_id, "go on")
            result = await runtime.wait(info.run_id)
    store.close()
    assert result.status == "error" and result.error is not None
    assert result.error["code"] == "budget-exceeded"
    assert (result.error["data"]["kind"], result.error["data"]["owner"]) == ("tokens", run_id)

    events = _usage_events(state, run_id)
    # The resumed life spent only what the first one left: 400 tokens, four responses.
    resumed = events[before:]
    assert sum(e["input_tokens"] + e["output_tokens"] for e in resumed) == LIMIT - 100 * BEFORE_KILL
    store = SQLiteStore(state)
    try:
        ledger = store.get_header(run_id).meta["budget"]  # type: ignore[union-attr]
    finally:
        store.close()
    assert ledger["used"]["tokens"] == LIMIT and ledger["limit"] == {"tokens": LIMIT}
