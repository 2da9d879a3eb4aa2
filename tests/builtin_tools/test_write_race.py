"""Write and Edit under a concurrent symlink swap: nothing ever lands outside the checkout."""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

import anyio
import pytest

from membrane.errors import MembraneError, PathProtected
from membrane.tools.spec import ToolContext

from .conftest import call

pytestmark = pytest.mark.anyio

WRITES = 1000


_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def _swapper(checkout: Path, outside: Path, stop: threading.Event, swaps: list[int]) -> None:
    """Swap ``sub`` between a real folder and a link to ``outside`` (atomically, with
    ``renameat2(RENAME_EXCHANGE)``) until told to stop."""
    libc = ctypes.CDLL(None, use_errno=True)
    link = checkout / "sub.link"
    os.symlink(outside, link)
    names = [os.fsencode(checkout / "sub"), os.fsencode(link)]
    while not stop.is_set():
        if libc.renameat2(_AT_FDCWD, names[0], _AT_FDCWD, names[1], _RENAME_EXCHANGE) != 0:
            raise OSError(ctypes.get_errno(), "renameat2 failed")
        swaps[0] += 1
    if (checkout / "sub").is_symlink():
        libc.renameat2(_AT_FDCWD, names[0], _AT_FDCWD, names[1], _RENAME_EXCHANGE)


@pytest.mark.parametrize("tool", ["Write", "Edit"])
async def test_a_symlink_swap_never_moves_a_write_outside_the_checkout(
    tool: str, checkout: Path, outside: Path, context: ToolContext
) -> None:
    (checkout / "sub").mkdir()
    (checkout / "sub" / "f.txt").write_text("start\n")
    (outside / "f.txt").write_text("start\n")
    stop, swaps = threading.Event(), [0]
    thread = threading.Thread(target=_swapper, args=(checkout, outside, stop, swaps))
    thread.start()
    done = refused = 0
    try:
        with anyio.fail_after(120):
            for index in range(WRITES):
                if tool == "Write":
                    arguments = {"file_path": "sub/f.txt", "content": f"{index}\n"}
                else:
                    arguments = {"file_path": "sub/f.txt", "old_string": "\n", "new_string": "\n\n"}
                try:
                    await call(tool, arguments, context)
                    done += 1
                except MembraneError:
                    refused += 1
    finally:
        stop.set()
        thread.join()
    assert swaps[0] > 0 and done > 0
    assert done + refused == WRITES
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
    assert (outside / "f.txt").read_text() == "start\n"


@pytest.mark.parametrize(
    "relative",
    [
        ".agents/agents/general-purpose.md",
        ".claude/agents/general-purpose.md",
        ".opencode/agent/x.md",
        ".pi/agents/x.md",
        ".codex/skills/x/SKILL.md",
        ".AGENTS/agents/x.md",
    ],
)
async def test_write_cannot_plant_a_definition_in_a_catalog_root(
    relative: str, checkout: Path, context: ToolContext
) -> None:
    content = "---\nname: general-purpose\ntools: '*'\nallowed_subagents: '*'\n---\nx\n"
    with pytest.raises(PathProtected) as caught:
        await call("Write", {"file_path": relative, "content": content}, context)
    assert caught.value.code == "path-protected"
    assert not (checkout / relative).exists()
