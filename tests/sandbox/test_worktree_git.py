"""A worktree child's git may commit to its own detached HEAD and change nothing else."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest

from membrane.builtin_tools.bash import bash_tool
from membrane.sandbox import SandboxPolicy
from membrane.tools.spec import ToolContext

pytestmark = pytest.mark.anyio

_ID = ["-c", "user.name=t", "-c", "user.email=t@example.com"]


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *_ID, *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, Path]:
    main = (tmp_path / "main").resolve()
    main.mkdir()
    _git(main, "init", "-q", "-b", "master")
    (main / "a.txt").write_text("a\n")
    _git(main, "add", "a.txt")
    _git(main, "commit", "-q", "-m", "one")
    _git(main, "branch", "membrane/agent-other")
    tree = main / ".membrane" / "worktrees" / "mine"
    _git(main, "worktree", "add", "-q", "--detach", str(tree))
    return main, tree


async def _bash(backend: str, command: str, cwd: Path) -> dict[str, object]:
    tool = bash_tool(sandbox=SandboxPolicy(choice=backend))  # type: ignore[arg-type]
    with anyio.fail_after(30):
        result = await tool.handler({"command": command}, ToolContext(agent="w", cwd=cwd))
    assert isinstance(result, dict)
    return result


async def test_a_worktree_child_commits_to_its_own_head(
    os_sandbox: str, repo: tuple[Path, Path]
) -> None:
    main, tree = repo
    (tree / "sub").mkdir()  # Landlock cannot grant new top-level entries
    commit = "git -c user.name=t -c user.email=t@example.com commit -q"
    result = await _bash(
        os_sandbox, f"echo b > sub/b.txt && git add sub/b.txt && {commit} -m two", tree
    )
    assert result["exit_code"] == 0, result
    assert _git(tree, "log", "--format=%s", "-1") == "two"
    assert _git(main, "log", "--format=%s", "-1", "master") == "one"


@pytest.mark.parametrize(
    "command",
    [
        "git branch -D membrane/agent-other",
        "git update-ref refs/heads/master HEAD",
        "git branch -f master HEAD",
        "git config core.hooksPath .",
        "git tag planted",
        "echo '#!/bin/sh' > ../../../.git/hooks/post-checkout",
    ],
)
async def test_a_worktree_child_cannot_touch_other_branches_or_the_repository(
    os_sandbox: str, command: str, repo: tuple[Path, Path]
) -> None:
    main, tree = repo
    refs_before = _git(main, "for-each-ref")
    config_before = (main / ".git" / "config").read_text()
    await _bash(os_sandbox, command, tree)
    assert _git(main, "for-each-ref") == refs_before
    assert (main / ".git" / "config").read_text() == config_before
    assert not (main / ".git" / "hooks" / "post-checkout").exists()


@pytest.mark.parametrize(
    "command",
    [
        'echo /elsewhere > "$(git rev-parse --git-dir)/commondir"',
        'd=$(git rev-parse --git-dir); echo /x > "$d/c" && mv "$d/c" "$d/commondir"',
        'd=$(git rev-parse --git-dir); rm -f "$d/gitdir" && mkdir "$d/gitdir"',
        "echo 'gitdir: /elsewhere' > .git",
    ],
)
async def test_a_worktree_child_cannot_repoint_its_git_metadata(
    os_sandbox: str, command: str, repo: tuple[Path, Path]
) -> None:
    main, tree = repo
    admin = main / ".git" / "worktrees" / "mine"
    before = {name: (admin / name).read_text() for name in ("commondir", "gitdir")}
    dot_git = (tree / ".git").read_text()
    await _bash(os_sandbox, command, tree)
    assert {name: (admin / name).read_text() for name in ("commondir", "gitdir")} == before
    assert (tree / ".git").read_text() == dot_git
    assert _git(tree, "rev-parse", "--git-common-dir") == str(main / ".git")
