"""A background child resumed after kill -9 stays a background child: its completion notice to
its parent is written, never lost."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import InProcessProvider
from membrane.store import SQLiteStore
from membrane.testing import FunctionModel
from process_support import first_line_then_kill

from .conftest import Project, after_leases_expire

SCRIPT = Path(__file__).parent / "scripts" / "background_crash.py"


def _run_then_kill(project: Project, db: Path, point: str) -> dict[str, str]:
    found: dict[str, str] = first_line_then_kill(
        SCRIPT, db, project.root, project.home, point, what="the crash script"
    )
    return found


@pytest.mark.anyio
@pytest.mark.parametrize("point", ["published", "tool_call", "tool_result"])
async def test_a_background_child_resumed_after_kill_9_still_owes_its_parent_a_notice(
    project: Project, tmp_path: Path, point: str
) -> None:
    project.agent("lead", tools="Read", allowed_subagents="[worker]")
    project.agent("worker", tools="Read")
    db = tmp_path / "state.db"
    with anyio.fail_after(60):
        ids = await anyio.to_thread.run_sync(lambda: _run_then_kill(project, db, point))
    store = SQLiteStore(db, clock=after_leases_expire())
    header = store.get_header(ids["worker"])
    assert header is not None and header.status == "running" and header.meta["background"]

    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="the survey found 3 files")

    provider = InProcessProvider(FunctionModel(answer))
    with anyio.fail_after(30):
        async with project.runtime(provider, store=store) as runtime:
            info = await runtime.resume(ids["worker"], "go on")
            assert info.background is True
            result = await runtime.wait(ids["worker"])
    assert result.status == "completed"
    owed = [item for item in store.pending_outbox() if item.recipient == ids["lead"]]
    assert len(owed) == 1, owed
    assert "the survey found 3 files" in json.dumps(owed[0].payload)
