from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from membrane.builtin_tools.declarations import grep_tool
from membrane.errors import ToolArgumentsInvalid, ToolFailed
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
    assert "missing )" in info.value.message
    assert info.value.data["path"] == "$.pattern"


@pytest.mark.parametrize(
    "pattern", [r"(a)\1", r"a(?=b)", r"a(?!b)", r"(?<=a)b", r"(?<!a)b", r"(?>a)", "a++", r"a\Z"]
)
async def test_grep_refuses_what_a_linear_time_engine_cannot_offer_and_says_so(
    pattern: str, project: Path, context: ToolContext
) -> None:
    with pytest.raises(ToolArgumentsInvalid) as info:
        await call("Grep", {"pattern": pattern}, context)
    assert info.value.data["path"] == "$.pattern"
    assert "linear-time engine (RE2)" in info.value.message
    assert "backreferences" in info.value.message and "lookahead" in info.value.message


async def test_a_catastrophic_pattern_runs_in_bounded_time_and_never_stalls_the_loop(
    checkout: Path, context: ToolContext
) -> None:
    # `(a|aa)+$` on 40 `a`s then `b` takes a backtracking engine ~2**28 steps per line.
    (checkout / "big.txt").write_text(("a" * 40 + "b\n") * 2000)
    ticks = 0
    done = anyio.Event()

    async def tick() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await anyio.sleep(0)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(tick)
            result = await call("Grep", {"pattern": "(a|aa)+$", "path": "big.txt"}, context)
            done.set()
    assert result.startswith("No matches")
    assert ticks > 1  # the event loop kept running while the search did


async def test_grep_stops_with_a_clear_error_when_its_time_bound_is_hit(
    checkout: Path, context: ToolContext
) -> None:
    (checkout / "a.txt").write_text("x\n")
    with pytest.raises(ToolFailed) as info:
        await grep_tool(time_limit=0).handler({"pattern": "x"}, context)
    assert info.value.data["limit"] == "time"
    assert "time bound" in info.value.message


async def test_grep_keeps_common_syntax(project: Path, context: ToolContext) -> None:
    result = await call("Grep", {"pattern": r"^def \w+\(\)", "output_mode": "count"}, context)
    assert "src/app.py:1" in result and "src/util.py:2" in result


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
