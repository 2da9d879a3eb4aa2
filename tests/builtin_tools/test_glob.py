from __future__ import annotations

import os
from pathlib import Path

import pytest

from membrane.errors import PathOutsideCheckout, ToolFailed
from membrane.tools.spec import ToolContext

from .conftest import call

pytestmark = pytest.mark.anyio


def _touch(root: Path, relative: str, mtime: float | None = None) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(relative)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


async def test_glob_double_star_matches_at_any_depth_including_the_top(
    checkout: Path, context: ToolContext
) -> None:
    for name in ("top.py", "a/mid.py", "a/b/deep.py", "a/b/readme.md"):
        _touch(checkout, name)
    result = await call("Glob", {"pattern": "**/*.py", "sort": "name"}, context)
    assert result.splitlines() == ["a/b/deep.py", "a/mid.py", "top.py"]


async def test_glob_sorts_newest_first_by_default(checkout: Path, context: ToolContext) -> None:
    _touch(checkout, "old.txt", mtime=1_000_000)
    _touch(checkout, "new.txt", mtime=3_000_000)
    _touch(checkout, "mid.txt", mtime=2_000_000)
    result = await call("Glob", {"pattern": "*.txt"}, context)
    assert result.splitlines() == ["new.txt", "mid.txt", "old.txt"]


async def test_glob_single_star_stays_in_one_folder(checkout: Path, context: ToolContext) -> None:
    _touch(checkout, "a.py")
    _touch(checkout, "pkg/b.py")
    assert (await call("Glob", {"pattern": "*.py"}, context)).splitlines() == ["a.py"]


async def test_glob_skips_git_metadata(checkout: Path, context: ToolContext) -> None:
    _touch(checkout, ".git/config")
    _touch(checkout, ".git/hooks/pre-commit.sample")
    _touch(checkout, "src/app.cfg")
    result = await call("Glob", {"pattern": "**/*", "sort": "name"}, context)
    assert result.splitlines() == ["src/app.cfg"]


async def test_glob_braces_give_alternatives(checkout: Path, context: ToolContext) -> None:
    for name in ("ui/a.ts", "ui/b.tsx", "ui/c.js"):
        _touch(checkout, name)
    result = await call("Glob", {"pattern": "ui/*.{ts,tsx}", "sort": "name"}, context)
    assert result.splitlines() == ["ui/a.ts", "ui/b.tsx"]


async def test_glob_under_a_path_lists_paths_relative_to_the_checkout(
    checkout: Path, context: ToolContext
) -> None:
    _touch(checkout, "docs/guide/intro.md")
    _touch(checkout, "notes.md")
    result = await call("Glob", {"pattern": "**/*.md", "path": "docs"}, context)
    assert result.splitlines() == ["docs/guide/intro.md"]


async def test_glob_in_a_read_root_lists_absolute_paths(
    outside: Path, context: ToolContext
) -> None:
    _touch(outside, "x.log")
    arguments = {"pattern": "*.log", "path": str(outside)}
    result = await call("Glob", arguments, context, read_paths=[outside])
    assert result == str(outside / "x.log")
    with pytest.raises(PathOutsideCheckout):
        await call("Glob", arguments, context)


async def test_glob_bounds_the_count_and_says_how_many_were_left_out(
    checkout: Path, context: ToolContext
) -> None:
    for index in range(7):
        _touch(checkout, f"f{index}.txt")
    result = await call("Glob", {"pattern": "*.txt", "limit": 3, "sort": "name"}, context)
    lines = result.splitlines()
    assert lines[:3] == ["f0.txt", "f1.txt", "f2.txt"]
    assert lines[3].startswith("[4 more files match")


async def test_glob_without_matches_says_so(checkout: Path, context: ToolContext) -> None:
    assert "No files match" in await call("Glob", {"pattern": "*.rs"}, context)


async def test_glob_in_a_missing_folder_fails(checkout: Path, context: ToolContext) -> None:
    with pytest.raises(ToolFailed, match="does not exist"):
        await call("Glob", {"pattern": "*", "path": "nope"}, context)
