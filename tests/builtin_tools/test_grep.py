from __future__ import annotations

from pathlib import Path

import pytest

from membrane.errors import ToolArgumentsInvalid
from membrane.tools.spec import ToolContext

from .conftest import call

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(checkout: Path) -> Path:
    (checkout / "src").mkdir()
    (checkout / "src" / "app.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    (checkout / "src" / "util.py").write_text(
        "def helper():\n    pass\n\ndef Main_two():\n    pass\n"
    )
    (checkout / "README.md").write_text("Run main() to start.\n")
    (checkout / ".git").mkdir()
    (checkout / ".git" / "packed-refs").write_text("def main in git metadata\n")
    (checkout / "blob.bin").write_bytes(b"def main\x00\x01\x02")
    return checkout


async def test_grep_lists_matching_files_by_default(project: Path, context: ToolContext) -> None:
    result = await call("Grep", {"pattern": r"def \w+\("}, context)
    assert result.splitlines() == ["src/app.py", "src/util.py"]


async def test_grep_content_mode_shows_path_line_number_and_text(
    project: Path, context: ToolContext
) -> None:
    result = await call("Grep", {"pattern": "def main", "output_mode": "content"}, context)
    assert result.splitlines() == ["src/app.py:3:def main():"]


async def test_grep_content_mode_adds_context_lines(project: Path, context: ToolContext) -> None:
    result = await call(
        "Grep", {"pattern": "def main", "output_mode": "content", "context": 1}, context
    )
    assert result.splitlines() == [
        "src/app.py-2-",
        "src/app.py:3:def main():",
        "src/app.py-4-    return os.getcwd()",
    ]


async def test_grep_count_mode_counts_lines_per_file(project: Path, context: ToolContext) -> None:
    result = await call("Grep", {"pattern": "pass", "output_mode": "count"}, context)
    lines = result.splitlines()
    assert lines[0] == "src/util.py:2"
    assert "2 matching lines in 1 files" in lines[-1]


async def test_grep_can_ignore_case(project: Path, context: ToolContext) -> None:
    sensitive = await call("Grep", {"pattern": "def main", "path": "src"}, context)
    insensitive = await call(
        "Grep", {"pattern": "def main", "path": "src", "case_insensitive": True}, context
    )
    assert sensitive.splitlines() == ["src/app.py"]
    assert insensitive.splitlines() == ["src/app.py", "src/util.py"]


async def test_grep_glob_filters_file_names_in_any_folder(
    project: Path, context: ToolContext
) -> None:
    result = await call("Grep", {"pattern": "main", "glob": "*.md"}, context)
    assert result.splitlines() == ["README.md"]


async def test_grep_searches_a_single_file(project: Path, context: ToolContext) -> None:
    result = await call(
        "Grep", {"pattern": "os", "path": "src/app.py", "output_mode": "count"}, context
    )
    assert result.splitlines()[0] == "src/app.py:2"


async def test_grep_skips_git_metadata_and_binary_files(
    project: Path, context: ToolContext
) -> None:
    result = await call("Grep", {"pattern": "def main"}, context)
    assert ".git/packed-refs" not in result and "blob.bin" not in result


async def test_grep_rejects_an_invalid_regex_with_the_reason(
    project: Path, context: ToolContext
) -> None:
    with pytest.raises(ToolArgumentsInvalid) as info:
        await call("Grep", {"pattern": "def main("}, context)
    assert info.value.code == "tool-arguments-invalid"
    assert "missing ), unterminated subpattern" in info.value.message
    assert info.value.data["path"] == "$.pattern"


async def test_grep_bounds_its_output_and_says_what_was_left_out(
    checkout: Path, context: ToolContext
) -> None:
    (checkout / "many.txt").write_text("hit\n" * 50)
    result = await call("Grep", {"pattern": "hit", "output_mode": "content", "limit": 5}, context)
    lines = result.splitlines()
    assert len(lines) == 6
    assert lines[-1].startswith("[45 more entries not shown")


async def test_grep_without_matches_says_so(project: Path, context: ToolContext) -> None:
    assert "No matches" in await call("Grep", {"pattern": "zebra"}, context)
