"""The real ``mcp-server-git`` from PyPI on a temporary repository, through the real runtime:
per-tool selection, a vetoed mutating call, and exclusion winning over a selector."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest

from .conftest import McpProject, error_of, last_tool_result

pytestmark = pytest.mark.anyio


def make_repository(path: Path) -> None:
    path.mkdir()
    (path / "README.md").write_text("hello\n", encoding="utf-8")

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=Test", "-c", "user.email=test@example.invalid", *args],
            cwd=path,
            check=True,
            capture_output=True,
        )

    git("init", "-q")
    git("add", "README.md")
    git("commit", "-q", "-m", "the first commit")


async def test_a_child_reads_the_log_and_cannot_commit(
    mcp_project: McpProject, tmp_path: Path
) -> None:
    repository = tmp_path / "repository"
    make_repository(repository)
    mcp_project.server(
        "git",
        {
            "command": sys.executable,
            "args": ["-m", "mcp_server_git", "--repository", str(repository)],
        },
    )
    mcp_project.agent(
        "historian",
        tools="mcp__git__git_log, mcp__git__git_status",
        allowed_subagents="[outsider]",
    )
    mcp_project.agent("outsider", tools="mcp__git__*", exclude_extensions="[git]")
    offered: dict[str, list[set[str]]] = {}
    requests: dict[str, list[ModelRequest]] = {}
    repo = str(repository)

    async def answer(request: ModelRequest) -> ModelResponse:
        offered.setdefault(request.agent, []).append({t["name"] for t in request.tools})
        requests.setdefault(request.agent, []).append(request)
        turn = len(offered[request.agent])
        if request.agent == "historian":
            plan = [
                ToolCall("c1", "mcp__git__git_log", {"repo_path": repo}),
                ToolCall("c2", "mcp__git__git_commit", {"repo_path": repo, "message": "x"}),
                ToolCall("c3", "Task", {"agent": "outsider", "task": "look"}),
            ]
            if turn <= len(plan):
                return ModelResponse(tool_calls=(plan[turn - 1],))
        return ModelResponse(text=f"{request.agent} done")

    async with mcp_project.runtime(answer) as (runtime, _servers):
        with anyio.fail_after(60):
            result = await runtime.run(SubagentStartRequest("historian", "go", request_id="r1"))

    assert result.status == "completed", result
    first = offered["historian"][0]
    assert {"mcp__git__git_log", "mcp__git__git_status"} <= first
    assert not {n for n in first if n.startswith("mcp__git__")} - {
        "mcp__git__git_log",
        "mcp__git__git_status",
    }
    log = last_tool_result(requests["historian"][1])
    assert not log.is_error
    assert "the first commit" in log.content
    vetoed = error_of(last_tool_result(requests["historian"][2]))
    assert vetoed["code"] == "tool-not-visible"
    assert "git_log" not in str(vetoed["message"])
    # exclude_extensions wins over the selector: the excluded server's tools never reach it.
    assert not {n for n in offered["outsider"][0] if n.startswith("mcp__")}
    commits = subprocess.run(
        ["git", "rev-list", "--count", "HEAD"], cwd=repository, capture_output=True, text=True
    )
    assert commits.stdout.strip() == "1"
