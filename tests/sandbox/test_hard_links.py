"""A writing child's commands cannot change a file outside what they may write through a hard
link already in the checkout: the command is refused before it runs (``hard-link-refused``),
under every backend, as the ``Bash`` tool runs it.

The kernel checks a write against the name the file was opened by, so neither bubblewrap's
mounts nor Landlock's rules tell the name inside the checkout from the one outside."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import pytest

from membrane.builtin_tools.bash import bash_tool
from membrane.errors import HardLinkRefused
from membrane.sandbox import SandboxPolicy
from membrane.tools.spec import ToolContext

pytestmark = pytest.mark.anyio

WRITES = [
    "echo changed > linked.txt",
    "echo changed >> sub/deep/linked.txt",
    "python3 -c \"open('linked.txt', 'w').write('changed')\"",
    "truncate -s 0 linked.txt",
]


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = (tmp_path / "checkout").resolve()
    (root / "sub" / "deep").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "notes.txt").write_text("notes\n")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file beside the checkout (the same file system, so it can be linked)."""
    folder = (tmp_path / "elsewhere").resolve()
    folder.mkdir()
    (folder / "keep.txt").write_text("keep\n")
    return folder / "keep.txt"


async def _bash(backend: str, command: str, checkout: Path, *, read_only: bool = False) -> object:
    tool = bash_tool(sandbox=SandboxPolicy(choice=backend))  # type: ignore[arg-type]
    context = ToolContext(agent="a", cwd=checkout, read_only=read_only)
    with anyio.fail_after(60):
        return await tool.handler({"command": command}, context)


@pytest.mark.parametrize("command", WRITES)
async def test_a_writing_child_is_refused_while_its_checkout_links_a_file_outside(
    any_sandbox: str, command: str, checkout: Path, outside: Path
) -> None:
    os.link(outside, checkout / "linked.txt")
    os.link(outside, checkout / "sub" / "deep" / "linked.txt")
    with pytest.raises(HardLinkRefused) as info:
        await _bash(any_sandbox, f"{command}; echo ran > notes.txt", checkout)
    assert info.value.code == "hard-link-refused"
    assert info.value.data["links"] == 3 and info.value.data["inside"] == 2
    assert info.value.data["path"] in {
        str(checkout / "linked.txt"),
        str(checkout / "sub/deep/linked.txt"),
    }
    assert outside.read_text() == "keep\n"
    assert (checkout / "notes.txt").read_text() == "notes\n"


async def test_a_link_to_a_control_file_of_the_checkout_is_refused(
    any_sandbox: str, checkout: Path
) -> None:
    config = checkout / ".git" / "config"
    before = config.read_text()
    os.link(config, checkout / "config-copy")
    with pytest.raises(HardLinkRefused) as info:
        await _bash(any_sandbox, "echo '[core] hooksPath = /x' >> config-copy", checkout)
    assert info.value.data["path"] == str(checkout / "config-copy")
    assert config.read_text() == before


async def test_links_between_names_inside_the_checkout_are_written_as_usual(
    any_sandbox: str, checkout: Path
) -> None:
    os.link(checkout / "notes.txt", checkout / "sub" / "same.txt")
    result = await _bash(any_sandbox, "echo changed > sub/same.txt", checkout)
    assert isinstance(result, dict) and result["exit_code"] == 0, result
    assert (checkout / "notes.txt").read_text() == "changed\n"


async def test_a_read_only_child_runs_and_cannot_write_through_the_link(
    os_sandbox: str, checkout: Path, outside: Path
) -> None:
    os.link(outside, checkout / "linked.txt")
    result = await _bash(
        os_sandbox, "cat linked.txt; echo changed > linked.txt", checkout, read_only=True
    )
    assert isinstance(result, dict) and result["stdout"] == "keep\n", result
    assert outside.read_text() == "keep\n"


async def test_the_command_runs_once_the_link_is_a_copy(
    os_sandbox: str, checkout: Path, outside: Path
) -> None:
    os.link(outside, checkout / "linked.txt")
    with pytest.raises(HardLinkRefused):
        await _bash(os_sandbox, "echo changed > linked.txt", checkout)
    subprocess.run(
        ["cp", "--remove-destination", str(outside), str(checkout / "linked.txt")], check=True
    )
    result = await _bash(os_sandbox, "echo changed > linked.txt", checkout)
    assert isinstance(result, dict) and result["exit_code"] == 0, result
    assert outside.read_text() == "keep\n"
    assert (checkout / "linked.txt").read_text() == "changed\n"
