"""``Edit`` and ``Write`` refuse a file with other hard links: another name of it may lie outside
the checkout, which no path check can see."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from membrane.errors import HardLinkRefused, PathOutsideCheckout
from membrane.tools.spec import ToolContext

from .conftest import call

pytestmark = pytest.mark.anyio


@pytest.fixture
def linked(checkout: Path, outside: Path) -> Path:
    (outside / "keep.txt").write_text("keep\n")
    os.link(outside / "keep.txt", checkout / "linked.txt")
    return checkout / "linked.txt"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("Edit", {"file_path": "linked.txt", "old_string": "keep", "new_string": "changed"}),
        ("Write", {"file_path": "linked.txt", "content": "changed\n"}),
    ],
)
async def test_a_file_with_another_hard_link_is_not_changed(
    tool: str, arguments: dict[str, object], linked: Path, outside: Path, context: ToolContext
) -> None:
    with pytest.raises(HardLinkRefused) as info:
        await call(tool, arguments, context)
    assert info.value.code == "hard-link-refused"
    assert isinstance(info.value, PathOutsideCheckout)
    assert info.value.data["links"] == 2
    assert (outside / "keep.txt").read_text() == "keep\n"
    assert linked.read_text() == "keep\n"
    assert os.stat(linked).st_ino == os.stat(outside / "keep.txt").st_ino


async def test_a_file_with_one_link_is_written_as_before(
    checkout: Path, context: ToolContext
) -> None:
    (checkout / "own.txt").write_text("keep\n")
    await call("Edit", {"file_path": "own.txt", "old_string": "keep", "new_string": "new"}, context)
    await call("Write", {"file_path": "fresh.txt", "content": "x\n"}, context)
    assert (checkout / "own.txt").read_text() == "new\n"
    assert (checkout / "fresh.txt").read_text() == "x\n"
