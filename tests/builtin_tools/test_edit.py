from __future__ import annotations

from pathlib import Path

import pytest

from membrane.errors import PathOutsideCheckout, ToolFailed
from membrane.tools.spec import ToolContext

from .conftest import call

pytestmark = pytest.mark.anyio


async def test_edit_replaces_one_exact_occurrence(checkout: Path, context: ToolContext) -> None:
    target = checkout / "app.py"
    target.write_text("a = 1\nb = 2\n")
    result = await call(
        "Edit", {"file_path": "app.py", "old_string": "b = 2", "new_string": "b = 3"}, context
    )
    assert target.read_text() == "a = 1\nb = 3\n"
    assert "replaced 1 occurrence" in result and "line 2" in result


async def test_edit_fails_when_the_old_text_is_absent(checkout: Path, context: ToolContext) -> None:
    target = checkout / "app.py"
    target.write_text("a = 1\n")
    with pytest.raises(ToolFailed, match="not found") as info:
        await call(
            "Edit", {"file_path": "app.py", "old_string": "a = 2", "new_string": "a = 3"}, context
        )
    assert info.value.data["occurrences"] == 0
    assert target.read_text() == "a = 1\n"


async def test_edit_fails_when_the_old_text_is_ambiguous_and_says_how_often_it_appears(
    checkout: Path, context: ToolContext
) -> None:
    target = checkout / "app.py"
    target.write_text("x = 0\nx = 0\nx = 0\n")
    with pytest.raises(ToolFailed, match="appears 3 times") as info:
        await call(
            "Edit", {"file_path": "app.py", "old_string": "x = 0", "new_string": "x = 1"}, context
        )
    assert "replace_all" in info.value.message
    assert target.read_text() == "x = 0\nx = 0\nx = 0\n"


async def test_edit_replace_all_changes_every_occurrence(
    checkout: Path, context: ToolContext
) -> None:
    target = checkout / "app.py"
    target.write_text("x = 0\ny = 0\nx = 0\n")
    result = await call(
        "Edit",
        {"file_path": "app.py", "old_string": "x", "new_string": "z", "replace_all": True},
        context,
    )
    assert target.read_text() == "z = 0\ny = 0\nz = 0\n"
    assert "replaced 2 occurrences" in result


async def test_edit_fails_when_old_and_new_are_identical(
    checkout: Path, context: ToolContext
) -> None:
    (checkout / "app.py").write_text("a\n")
    with pytest.raises(ToolFailed, match="identical"):
        await call("Edit", {"file_path": "app.py", "old_string": "a", "new_string": "a"}, context)


async def test_edit_of_a_missing_file_points_to_write(checkout: Path, context: ToolContext) -> None:
    with pytest.raises(ToolFailed, match="Write"):
        await call("Edit", {"file_path": "new.py", "old_string": "a", "new_string": "b"}, context)


async def test_edit_keeps_crlf_line_ends_when_quoted_with_lf(
    checkout: Path, context: ToolContext
) -> None:
    target = checkout / "win.txt"
    target.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await call(
        "Edit",
        {"file_path": "win.txt", "old_string": "one\ntwo", "new_string": "1\n2"},
        context,
    )
    assert target.read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_edit_keeps_the_file_mode(checkout: Path, context: ToolContext) -> None:
    target = checkout / "run.sh"
    target.write_text("echo a\n")
    target.chmod(0o750)
    await call("Edit", {"file_path": "run.sh", "old_string": "a", "new_string": "b"}, context)
    assert target.stat().st_mode & 0o777 == 0o750


async def test_edit_outside_the_checkout_is_refused(outside: Path, context: ToolContext) -> None:
    target = outside / "other.py"
    target.write_text("a = 1\n")
    for path in (str(target), "../outside/other.py"):
        with pytest.raises(PathOutsideCheckout) as info:
            await call("Edit", {"file_path": path, "old_string": "1", "new_string": "2"}, context)
        assert info.value.code == "path-outside-checkout"
    assert target.read_text() == "a = 1\n"


async def test_edit_through_a_symlink_that_leaves_the_checkout_is_refused(
    checkout: Path, outside: Path, context: ToolContext
) -> None:
    target = outside / "secret.txt"
    target.write_text("keep\n")
    (checkout / "link.txt").symlink_to(target)
    with pytest.raises(PathOutsideCheckout, match="resolves to"):
        await call(
            "Edit", {"file_path": "link.txt", "old_string": "keep", "new_string": "gone"}, context
        )
    assert target.read_text() == "keep\n"
