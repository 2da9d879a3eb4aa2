"""The checkout's control folders, ``.git`` and ``.membrane``, are not written by mutating tools,
except the calling agent's own memory folder; git itself still works."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from membrane.builtin_tools.bash import bash_tool
from membrane.errors import PathOutsideCheckout, PathProtected
from membrane.sandbox import SandboxPolicy
from membrane.tools.spec import ToolContext

from .conftest import call

GUARD = bash_tool(sandbox=SandboxPolicy(choice="guard"))

pytestmark = pytest.mark.anyio

PROTECTED = [
    ".membrane/extensions/evil.py",
    ".membrane/agents/worker.md",
    ".membrane/config.toml",
    ".membrane/memory/someone-else/MEMORY.md",
    ".membrane/worktrees/other/file.txt",
    ".git/hooks/pre-commit",
    ".git/config",
    "vendor/lib/.git/hooks/post-checkout",
    ".GIT/config",
]
OWN_MEMORY = [".membrane/memory/worker/MEMORY.md", ".membrane/memory.local/worker/notes.md"]


@pytest.fixture
def project(checkout: Path) -> Path:
    for folder in (".git/hooks", ".membrane/extensions", ".membrane/agents", "vendor/lib/.git"):
        (checkout / folder).mkdir(parents=True)
    (checkout / ".git" / "config").write_text("[core]\n")
    (checkout / ".membrane" / "config.toml").write_text("")
    return checkout


@pytest.mark.parametrize("relative", PROTECTED)
async def test_write_refuses_the_control_folders(
    project: Path, context: ToolContext, relative: str
) -> None:
    before = (project / ".git" / "config").read_text()
    with pytest.raises(PathProtected) as caught:
        await call("Write", {"file_path": relative, "content": "import os\n"}, context)
    assert caught.value.code == "path-protected"
    assert isinstance(caught.value, PathOutsideCheckout)
    assert relative in caught.value.message
    target = project / relative
    assert not target.exists() or target.read_text() != "import os\n"
    assert (project / ".git" / "config").read_text() == before


async def test_edit_refuses_git_config(project: Path, context: ToolContext) -> None:
    with pytest.raises(PathProtected, match=r"\.git"):
        await call(
            "Edit",
            {"file_path": ".git/config", "old_string": "[core]", "new_string": "[x]"},
            context,
        )
    assert (project / ".git" / "config").read_text() == "[core]\n"


async def test_a_worktree_git_file_cannot_be_rewritten(
    checkout: Path, context: ToolContext
) -> None:
    (checkout / ".git").write_text("gitdir: /elsewhere/.git/worktrees/x\n")
    with pytest.raises(PathProtected):
        await call("Write", {"file_path": ".git", "content": "gitdir: /tmp/evil\n"}, context)
    assert (checkout / ".git").read_text().startswith("gitdir: /elsewhere")


async def test_a_symlink_into_git_does_not_get_around_the_rule(
    project: Path, context: ToolContext
) -> None:
    (project / "hooks").symlink_to(project / ".git" / "hooks", target_is_directory=True)
    with pytest.raises(PathProtected):
        await call("Write", {"file_path": "hooks/pre-commit", "content": "#!/bin/sh\n"}, context)
    assert not (project / ".git" / "hooks" / "pre-commit").exists()


@pytest.mark.parametrize("relative", OWN_MEMORY)
async def test_an_agent_may_write_its_own_memory_folder(
    project: Path, context: ToolContext, relative: str
) -> None:
    await call("Write", {"file_path": relative, "content": "remember\n"}, context)
    assert (project / relative).read_text() == "remember\n"


@pytest.mark.parametrize(
    "command",
    [
        "echo 'import os' > .membrane/extensions/evil.py",
        "cp notes.txt .membrane/agents/",
        "echo '[alias]' >> .git/config",
        "tee .git/hooks/pre-commit < notes.txt",
    ],
)
async def test_bash_refuses_writes_into_the_control_folders(
    project: Path, context: ToolContext, command: str
) -> None:
    (project / "notes.txt").write_text("n")
    with pytest.raises(PathProtected) as caught:
        await GUARD.handler({"command": command}, context)
    assert caught.value.data["reason"] == "protected"
    assert not (project / ".membrane" / "extensions" / "evil.py").exists()
    assert not (project / ".git" / "hooks" / "pre-commit").exists()
    assert (project / ".git" / "config").read_text() == "[core]\n"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_git_commands_still_update_the_repository_under_the_guard_alone(
    checkout: Path, context: ToolContext
) -> None:
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    commit = "git -c user.name=t -c user.email=t@example.com commit -q"
    script = (
        f"{commit} --allow-empty -m one && echo x > a.txt && git add a.txt && "
        f"{commit} -am two && git rev-list --count HEAD"
    )
    result = await GUARD.handler({"command": script}, context)
    assert result["exit_code"] == 0, result["stderr"]
    assert result["stdout"].strip() == "2"
