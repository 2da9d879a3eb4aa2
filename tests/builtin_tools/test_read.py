from __future__ import annotations

from pathlib import Path

import pytest

from membrane.builtin_tools.read import DEFAULT_READ_LINES, MAX_LINE_CHARS
from membrane.errors import PathOutsideCheckout, ToolArgumentsInvalid, ToolFailed
from membrane.tools.spec import ToolContext

from .conftest import call

pytestmark = pytest.mark.anyio


async def test_read_numbers_every_line_from_one(checkout: Path, context: ToolContext) -> None:
    (checkout / "a.txt").write_text("alpha\nbeta\ngamma\n")
    result = await call("Read", {"file_path": "a.txt"}, context)
    assert result == "     1\talpha\n     2\tbeta\n     3\tgamma"


async def test_read_resolves_relative_paths_against_the_checkout_not_the_process_cwd(
    checkout: Path, context: ToolContext, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (checkout / "sub").mkdir()
    (checkout / "sub" / "f.py").write_text("inside\n")
    elsewhere = tmp_path / "elsewhere" / "sub"
    elsewhere.mkdir(parents=True)
    (elsewhere / "f.py").write_text("wrong\n")
    monkeypatch.chdir(elsewhere.parent)
    assert "inside" in await call("Read", {"file_path": "sub/f.py"}, context)


async def test_read_pages_with_offset_and_limit_and_says_how_to_continue(
    checkout: Path, context: ToolContext
) -> None:
    (checkout / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    result = await call("Read", {"file_path": "long.txt", "offset": 4, "limit": 3}, context)
    lines = result.splitlines()
    assert lines[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert "lines 4-6 of 10" in lines[3] and "offset=7" in lines[3]


async def test_read_returns_at_most_the_default_number_of_lines(
    checkout: Path, context: ToolContext
) -> None:
    (checkout / "big.txt").write_text("x\n" * (DEFAULT_READ_LINES + 5))
    result = await call("Read", {"file_path": "big.txt"}, context)
    numbered = [line for line in result.splitlines() if line.endswith("\tx")]
    assert len(numbered) == DEFAULT_READ_LINES
    assert f"offset={DEFAULT_READ_LINES + 1}" in result


async def test_read_cuts_very_long_lines(checkout: Path, context: ToolContext) -> None:
    (checkout / "min.js").write_text("a" * (MAX_LINE_CHARS * 3) + "\n")
    result = await call("Read", {"file_path": "min.js"}, context)
    assert len(result) < MAX_LINE_CHARS * 2
    assert "cut at" in result


async def test_read_outside_the_checkout_is_allowed_in_a_read_root_only(
    outside: Path, context: ToolContext
) -> None:
    (outside / "notes.md").write_text("shared notes\n")
    for path in (str(outside / "notes.md"), "../outside/notes.md"):
        found = await call("Read", {"file_path": path}, context, read_paths=[outside])
        assert "shared notes" in found
        with pytest.raises(PathOutsideCheckout) as info:
            await call("Read", {"file_path": path}, context)
        assert info.value.code == "path-outside-checkout"


async def test_read_of_a_missing_file_suggests_a_close_name(
    checkout: Path, context: ToolContext
) -> None:
    (checkout / "config.yaml").write_text("a: 1\n")
    with pytest.raises(ToolFailed) as info:
        await call("Read", {"file_path": "config.yml"}, context)
    assert "does not exist" in info.value.message and "config.yaml" in info.value.message
    assert info.value.code == "tool-failed"


async def test_read_refuses_a_directory_and_points_to_glob(
    checkout: Path, context: ToolContext
) -> None:
    (checkout / "src").mkdir()
    with pytest.raises(ToolFailed, match=r"directory.*Glob"):
        await call("Read", {"file_path": "src"}, context)


async def test_read_refuses_a_binary_file(checkout: Path, context: ToolContext) -> None:
    (checkout / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(ToolFailed, match="binary"):
        await call("Read", {"file_path": "image.png"}, context)


async def test_read_of_an_empty_file_says_so(checkout: Path, context: ToolContext) -> None:
    (checkout / "empty.txt").write_text("")
    assert "empty" in await call("Read", {"file_path": "empty.txt"}, context)


async def test_read_with_an_offset_past_the_end_fails_with_the_line_count(
    checkout: Path, context: ToolContext
) -> None:
    (checkout / "short.txt").write_text("one\ntwo\n")
    with pytest.raises(ToolFailed, match="has 2 lines"):
        await call("Read", {"file_path": "short.txt", "offset": 5}, context)


async def test_read_rejects_a_bad_limit_directly(checkout: Path, context: ToolContext) -> None:
    (checkout / "a.txt").write_text("a\n")
    with pytest.raises(ToolArgumentsInvalid) as info:
        await call("Read", {"file_path": "a.txt", "limit": 0}, context)
    assert info.value.data["path"] == "$.limit"


async def test_read_decodes_invalid_utf8_with_replacement(
    checkout: Path, context: ToolContext
) -> None:
    (checkout / "latin.txt").write_bytes(b"caf\xe9\n")
    assert "caf\ufffd" in await call("Read", {"file_path": "latin.txt"}, context)


def test_reads_description_names_no_other_tool() -> None:
    # A child given Read alone must not learn from it that an Edit tool exists.
    from membrane.builtin_tools.declarations import read_tool

    assert "Edit" not in read_tool().description and "Write" not in read_tool().description
