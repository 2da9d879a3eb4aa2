"""``isolation: worktree`` through the runtime: created before publication, the child's tools
work inside it, the outcome comes back in the result and the events, nothing falls back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from membrane.errors import SetupFailed, WorktreeUnavailable
from membrane.runtime import SubagentStartRequest
from membrane.testing import ScriptedModel

from .conftest import Project, git

CRASH = Path(__file__).parent / "worktree_crash_child.py"


def _reader() -> ScriptedModel:
    return ScriptedModel(
        {
            "agents": {
                "isolated": [
                    {"tool_calls": [{"name": "Read", "arguments": {"path": "README.md"}}]},
                    {"text": "read it"},
                ]
            }
        }
    )


@pytest.mark.anyio
async def test_an_isolated_child_works_in_its_own_worktree_and_reports_the_outcome(
    repo: Project,
) -> None:
    repo.agent("isolated", tools="Read", isolation="worktree")
    model = _reader()
    async with repo.runtime(model) as runtime:
        stream = runtime.events()
        result = await runtime.run(SubagentStartRequest("isolated", "look"))
        events = [e for e in runtime.store.events(session_id=result.run_id)]
        stream.close()
    tool_result = next(m for m in model.requests[1].messages if m.role == "tool")
    worktrees = repo.root.resolve() / ".membrane" / "worktrees"
    assert f"in {worktrees}" in tool_result.content
    assert str(worktrees) in model.requests[0].system
    assert result.worktree is not None
    assert set(result.worktree) >= {"branch", "commit", "has_changes"}
    assert result.worktree["commit"] == git(repo.root, "rev-parse", "HEAD")
    assert result.worktree["has_changes"] is False
    assert events[0].data["checkout"] == "worktree"
    assert events[-1].kind == "completed"
    assert events[-1].data["worktree"]["has_changes"] is False
    assert [p for p in worktrees.iterdir() if not p.name.startswith(".")] == []


@pytest.mark.anyio
async def test_a_worktree_outside_a_git_repository_is_unavailable_and_nothing_starts(
    project: Project,
) -> None:
    project.agent("isolated", tools="Read", isolation="worktree")
    model = _reader()
    async with project.runtime(model) as runtime:
        with pytest.raises(WorktreeUnavailable) as caught:
            await runtime.start(SubagentStartRequest("isolated", "look"))
        assert caught.value.code == "worktree-unavailable"
        assert runtime.runs() == []
        assert runtime.store.list_sessions() == []
    assert model.requests == []


@pytest.mark.anyio
async def test_a_runtime_without_a_project_cannot_isolate(project: Project) -> None:
    project.agent("isolated", tools="Read", isolation="worktree")
    async with project.runtime(_reader(), project=None) as runtime:
        with pytest.raises(WorktreeUnavailable):
            await runtime.start(SubagentStartRequest("isolated", "look"))


@pytest.mark.anyio
async def test_a_setup_failure_removes_the_worktree_it_made(repo: Project) -> None:
    repo.agent("isolated", tools="Read", isolation="worktree")

    def fail(step: str) -> None:
        if step == "local-tools":
            raise RuntimeError("injected")

    async with repo.runtime(_reader(), on_setup_step=fail) as runtime:
        with pytest.raises(SetupFailed):
            await runtime.start(SubagentStartRequest("isolated", "look"))
        assert runtime.runs() == []
    worktrees = repo.root / ".membrane" / "worktrees"
    assert [p for p in worktrees.iterdir() if not p.name.startswith(".")] == []
    assert "worktree" not in git(repo.root, "worktree", "list").split("\n", 1)[-1]


@pytest.mark.anyio
async def test_opening_a_runtime_prunes_the_worktrees_of_a_crashed_one(repo: Project) -> None:
    crashed = subprocess.run(
        [sys.executable, str(CRASH), str(repo.root), "crashed-run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    left = Path(crashed.stdout.strip())
    assert left.is_dir()
    async with repo.runtime(_reader()) as runtime:
        pruned = runtime.pruned_worktrees
    assert not left.exists()
    assert [o.has_changes for o in pruned] == [True]
    assert pruned[0].branch is not None and pruned[0].branch in git(repo.root, "branch")
