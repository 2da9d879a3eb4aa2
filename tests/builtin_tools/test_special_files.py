"""Named pipes and other non-regular files: refused or skipped, never waited on."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from membrane.errors import ToolFailed
from membrane.tools.spec import ToolContext

from .conftest import call

pytestmark = pytest.mark.anyio

#: If a tool does block on the pipe, a writer feeds it after this long so the test fails
#: (with a wrong answer) instead of hanging the whole run.
RESCUE_AFTER = 10.0


def _release_readers(path: Path) -> None:
    """Feed a reader blocked on the pipe one matching line, so a tool that waited shows it."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"needle\n")
        finally:
            os.close(fd)


def _rescue(path: Path, done: threading.Event) -> None:
    if done.wait(RESCUE_AFTER):
        return
    while not done.wait(0.05):
        _release_readers(path)


@pytest.fixture
def fifo(checkout: Path) -> Iterator[Path]:
    path = checkout / "pipe"
    os.mkfifo(path)
    done = threading.Event()
    rescuer = threading.Thread(target=_rescue, args=(path, done), daemon=True)
    rescuer.start()
    try:
        yield path
    finally:
        done.set()
        rescuer.join()


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("Read", {"file_path": "pipe"}),
        ("Edit", {"file_path": "pipe", "old_string": "a", "new_string": "b"}),
        ("Write", {"file_path": "pipe", "content": "x"}),
    ],
)
async def test_file_tools_refuse_a_named_pipe_without_waiting_on_it(
    fifo: Path, context: ToolContext, tool: str, arguments: dict[str, str]
) -> None:
    with anyio.fail_after(RESCUE_AFTER * 2), pytest.raises(ToolFailed) as caught:
        await call(tool, arguments, context)
    assert "a named pipe" in caught.value.message
    assert caught.value.data["path"] == str(fifo)
    assert fifo.is_fifo()


async def test_grep_skips_a_named_pipe_and_searches_the_rest(
    fifo: Path, checkout: Path, context: ToolContext
) -> None:
    (checkout / "notes.txt").write_text("needle\n")
    with anyio.fail_after(RESCUE_AFTER * 2):
        assert await call("Grep", {"pattern": "needle"}, context) == "notes.txt"
        named = await call("Grep", {"pattern": "needle", "path": "pipe"}, context)
    assert named.startswith("No matches")


async def test_read_refuses_a_character_device(context: ToolContext) -> None:
    # /dev is no read root unless the settings name it; named, a device is still refused.
    with pytest.raises(ToolFailed, match="a character device"):
        await call("Read", {"file_path": "/dev/null"}, context, read_paths=[Path("/dev")])
