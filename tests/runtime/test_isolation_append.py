"""An ``append``-mode child in a worktree (issue 7): it inherits a parent prompt that names the
main checkout, yet it is told plainly which folder is its own, and its built-in tools cannot
write into the main checkout, by absolute path, by ``..`` or through the shell."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest

from membrane.builtin_tools import register_builtin_tools
from membrane.runtime import RunResult, SubagentStartRequest
from membrane.testing import ScriptedModel
from membrane.tools.registry import ToolRegistry

from .conftest import Project, git

NOTE = "written by the child\n"


@pytest.fixture
def repo(repo: Project) -> Project:
    """The git repository (``conftest.repo``) with the real built-in tools."""
    registry = ToolRegistry()
    register_builtin_tools(registry)
    return dataclasses.replace(repo, registry=registry)


def _files(root: Path) -> dict[str, bytes]:
    """Every file of the main checkout outside ``.git`` and the worktrees folder, with content."""
    skip = (root / ".git", root / ".membrane" / "worktrees")
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and not any(path.is_relative_to(s) for s in skip)
    }


def _script(main: Path) -> ScriptedModel:
    """The lead delegates to ``worker``; the worker tries three ways out, then writes at home."""
    escapes: list[dict[str, Any]] = [
        {"name": "Write", "arguments": {"file_path": str(main / "escaped.txt"), "content": "x"}},
        {"name": "Write", "arguments": {"file_path": "../../../dotted.txt", "content": "x"}},
        {"name": "Bash", "arguments": {"command": f"echo x > {main / 'shell.txt'}"}},
    ]
    at_home = [
        {"name": "Write", "arguments": {"file_path": "notes.txt", "content": NOTE}},
        {"name": "Bash", "arguments": {"command": "pwd"}},
    ]
    return ScriptedModel(
        {
            "agents": {
                "lead": [
                    {
                        "tool_calls": [
                            {"name": "Task", "arguments": {"agent": "worker", "task": "go"}}
                        ]
                    },
                    {"text": "lead done"},
                ],
                "worker": [
                    {"tool_calls": escapes},
                    {"tool_calls": at_home},
                    {"text": "worker done"},
                ],
            }
        }
    )


@pytest.mark.anyio
async def test_an_append_mode_childs_builtin_tools_cannot_write_into_the_main_checkout(
    repo: Project,
) -> None:
    main = repo.root.resolve()
    repo.agent("lead", tools="Read", allowed_subagents="[worker]")
    repo.agent("worker", prompt_mode="append", isolation="worktree", tools="Read, Write, Bash")
    model = _script(main)
    before = _files(main)
    with anyio.fail_after(60):
        async with repo.runtime(model) as runtime:
            lead = await runtime.run(SubagentStartRequest("lead", "delegate"))
            (info,) = runtime.runs(parent_id=lead.run_id)
            worker_events = list(runtime.store.events(session_id=info.run_id))
    assert lead.status == "completed"
    assert info.result is not None
    worker: RunResult = info.result
    assert worker.status == "completed"

    # The parent's prompt names the main checkout, and the child inherits it verbatim.
    lead_system = next(r.system for r in model.requests if r.agent == "lead")
    worker_system = next(r.system for r in model.requests if r.agent == "worker")
    assert str(main) in lead_system
    assert lead_system in worker_system
    # ...yet the child is told its own folder: the worktree it runs in.
    (published,) = [e for e in worker_events if e.kind == "published"]
    worktree = Path(published.data["worktree"])
    assert worktree != main and worktree.is_relative_to(main / ".membrane" / "worktrees")
    assert str(worktree) in worker_system.replace(lead_system, "")

    # Every way out is refused with the checkout error, and nothing reached the main checkout.
    results = {e.data["id"]: e.data for e in worker_events if e.kind == "tool_result"}
    calls = [e.data for e in worker_events if e.kind == "tool_call"]
    refused = [results[call["id"]] for call in calls[:3]]
    assert [(r["name"], r["is_error"], r.get("code")) for r in refused[:2]] == [
        ("Write", True, "path-outside-checkout"),
        ("Write", True, "path-outside-checkout"),
    ]
    # Bash is refused by the shell guard, or runs and the OS sandbox stops the write.
    shell = refused[2]
    assert shell["name"] == "Bash"
    if shell["is_error"]:
        assert shell.get("code") == "path-outside-checkout"
    else:
        assert published.data["sandbox"]["confined"] is True
    assert _files(main) == before

    # The shell runs in the worktree; the relative write landed there and came back as the
    # child's branch.
    assert [results[call["id"]]["is_error"] for call in calls[3:]] == [False, False]
    last = [r for r in model.requests if r.agent == "worker"][-1]
    (pwd,) = [m for m in last.messages if m.tool_call_id == calls[4]["id"]]
    assert str(worktree) in pwd.content
    assert worker.worktree is not None
    assert worker.worktree["has_changes"] is True
    branch, commit = worker.worktree["branch"], worker.worktree["commit"]
    assert branch.startswith("membrane/agent-")
    assert git(main, "rev-parse", branch) == commit
    assert git(main, "show", f"{branch}:notes.txt") + "\n" == NOTE
    assert git(main, "rev-parse", "HEAD") != commit
    assert not worktree.exists()
