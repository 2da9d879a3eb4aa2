from __future__ import annotations

from pathlib import Path

import pytest

from membrane.errors import PathOutsideCheckout, ToolFailed
from membrane.tools.spec import ToolContext

from .conftest import call

pytestmark = pytest.mark.anyio


async def test_write_creates_a_file_and_its_parent_folders(
    checkout: Path, context: ToolContext
) -> None:
    result = await call("Write", {"file_path": "pkg/sub/mod.py", "content": "x = 1\n"}, context)
    assert (checkout / "pkg" / "sub" / "mod.py").read_text() == "x = 1\n"
    assert result.startswith("Created pkg/sub/mod.py")


async def test_write_overwrites_an_existing_file(checkout: Path, context: ToolContext) -> None:
    (checkout / "a.txt").write_text("old content that is longer\n")
    result = await call("Write", {"file_path": str(checkout / "a.txt"), "content": "new"}, context)
    assert (checkout / "a.txt").read_text() == "new"
    assert result.startswith("Overwrote a.txt")
    assert [p.name for p in checkout.iterdir()] == ["a.txt"]


async def test_write_into_a_symlinked_folder_inside_the_checkout_is_allowed(
    checkout: Path, context: ToolContext
) -> None:
    (checkout / "real").mkdir()
    (checkout / "alias").symlink_to(checkout / "real")
    await call("Write", {"file_path": "alias/f.txt", "content": "ok"}, context)
    assert (checkout / "real" / "f.txt").read_text() == "ok"


@pytest.mark.parametrize("how", ["absolute", "dotdot", "dotdot-inside-path"])
async def test_write_outside_the_checkout_is_refused(
    how: str, checkout: Path, outside: Path, context: ToolContext
) -> None:
    path = {
        "absolute": str(outside / "x.txt"),
        "dotdot": "../outside/x.txt",
        "dotdot-inside-path": "sub/../../outside/x.txt",
    }[how]
    with pytest.raises(PathOutsideCheckout) as info:
        await call("Write", {"file_path": path, "content": "nope"}, context)
    assert info.value.data["checkout"] == str(checkout)
    assert not (outside / "x.txt").exists()


async def test_write_through_a_symlinked_folder_that_leaves_the_checkout_is_refused(
    checkout: Path, outside: Path, context: ToolContext
) -> None:
    (checkout / "escape").symlink_to(outside, target_is_directory=True)
    with pytest.raises(PathOutsideCheckout, match="resolves to"):
        await call("Write", {"file_path": "escape/x.txt", "content": "nope"}, context)
    assert list(outside.iterdir()) == []


async def test_write_through_a_dangling_symlink_pointing_outside_is_refused(
    checkout: Path, outside: Path, context: ToolContext
) -> None:
    (checkout / "later.txt").symlink_to(outside / "not-yet.txt")
    with pytest.raises(PathOutsideCheckout):
        await call("Write", {"file_path": "later.txt", "content": "nope"}, context)
    assert not (outside / "not-yet.txt").exists()


async def test_a_worktree_child_cannot_write_into_the_main_checkout(
    tmp_path: Path, checkout: Path
) -> None:
    worktree = checkout / ".membrane" / "worktrees" / "agent-1"
    worktree.mkdir(parents=True)
    child = ToolContext(agent="child", cwd=worktree)
    with pytest.raises(PathOutsideCheckout):
        await call("Write", {"file_path": str(checkout / "main.py"), "content": "x"}, child)
    await call("Write", {"file_path": "main.py", "content": "x"}, child)
    assert (worktree / "main.py").exists() and not (checkout / "main.py").exists()


async def test_write_onto_a_directory_fails(checkout: Path, context: ToolContext) -> None:
    (checkout / "dir").mkdir()
    with pytest.raises(ToolFailed, match="directory"):
        await call("Write", {"file_path": "dir", "content": "x"}, context)


async def test_write_with_no_cwd_uses_the_process_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    await call("Write", {"file_path": "here.txt", "content": "x"}, ToolContext())
    assert (tmp_path / "here.txt").read_text() == "x"
    with pytest.raises(PathOutsideCheckout):
        await call("Write", {"file_path": "../there.txt", "content": "x"}, ToolContext())
