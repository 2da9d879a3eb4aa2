"""Durable depth across a real process restart: killing the runtime never lowers a count."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from membrane.errors import DepthLimitExceeded
from membrane.runtime import SubagentStartRequest
from membrane.store import SQLiteStore
from membrane.testing import ScriptedModel
from process_support import first_line_then_kill

from .conftest import Project

SCRIPT = Path(__file__).parent / "scripts" / "depth_chain.py"


def _run_chain_then_kill(project: Project, db: Path, *, length: int, cap: int) -> list[str]:
    found: list[str] = first_line_then_kill(
        SCRIPT, db, project.root, project.home, length, cap, what="the chain process"
    )
    return found


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
