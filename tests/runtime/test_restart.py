"""Durable depth across a real process restart: killing the runtime never lowers a count."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from membrane.errors import DepthLimitExceeded
from membrane.runtime import SubagentStartRequest
from membrane.store import SQLiteStore
from membrane.testing import ScriptedModel

from .conftest import Project

SCRIPT = Path(__file__).parent / "scripts" / "depth_chain.py"


def _run_chain_then_kill(project: Project, db: Path, *, length: int, cap: int) -> list[str]:
    process = subprocess.Popen(
        [
            sys.executable,
            str(SCRIPT),
            str(db),
            str(project.root),
            str(project.home),
            str(length),
            str(cap),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise AssertionError(f"the chain process printed nothing: {process.stderr.read()}")  # type: ignore[union-attr]
        ids: list[str] = json.loads(line)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    return ids


@pytest.mark.anyio
async def test_a_restarted_runtime_rejects_a_start_beyond_the_cap_from_stored_depth(
    project: Project, tmp_path: Path
) -> None:
    project.agent("waiter")
    db = tmp_path / "state.db"
    with anyio.fail_after(60):
        ids = await anyio.to_thread.run_sync(
            lambda: _run_chain_then_kill(project, db, length=4, cap=3)
        )
    model = ScriptedModel({"default": [{"text": "ok"}]})
    store = SQLiteStore(db)
    async with project.runtime(model, store=store) as runtime:
        assert runtime.runs() == []
        depths = [store.get_header(run_id).delegation_depth for run_id in ids]  # type: ignore[union-attr]
        assert depths == [0, 1, 2, 3]
        with pytest.raises(DepthLimitExceeded) as caught:
            await runtime.start(
                SubagentStartRequest("waiter", "deeper", parent_id=ids[-1], max_depth=3)
            )
        assert caught.value.data["depth"] == 4
        sibling = await runtime.start(
            SubagentStartRequest("waiter", "beside", parent_id=ids[-2], max_depth=3)
        )
        assert sibling.depth == 3
        assert store.get_header(sibling.run_id).delegation_depth == 3  # type: ignore[union-attr]
    store.close()
