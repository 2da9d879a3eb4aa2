"""``Glob``: files whose path matches a pattern, newest first; the matcher ``Grep`` also uses.

Patterns use ``/`` separators. ``*`` and ``?`` stay within one path segment, ``**`` spans any
number of folders (zero included), ``[abc]``/``[!abc]`` are classes and ``{a,b}`` alternatives.
Wildcards match names that start with a dot. Folders in :data:`SKIPPED_DIRS` (version control
and tool caches) are never entered by a walk, but a pattern or path that names one explicitly
as its fixed prefix is searched.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from membrane.builtin_tools._support import in_thread, int_arg, optional_str_arg, str_arg
from membrane.builtin_tools.paths import (
    approved_scope,
    display_path,
    read_scope_for,
    resolve_path,
)
from membrane.builtin_tools.tool_limits import (
    DEFAULT_GLOB_LIMIT,
    MAX_GLOB_LIMIT,
    SKIPPED_DIRS,
)
from membrane.errors import ToolArgumentsInvalid, ToolFailed
from membrane.tools.spec import ToolContext

__all__ = [
    "DEFAULT_GLOB_LIMIT",
    "SKIPPED_DIRS",
    "GlobPattern",
    "handle",
    "walk_files",
]

NAME = "Glob"
MAX_BRACE_EXPANSIONS = 64

_MAGIC = re.compile(r"[*?\[{]")


def _expand_braces(pattern: str) -> list[str]:
    """``a{b,c}d`` -> ``[abd, acd]``, nested braces included; a brace without a comma stays."""
    depth = 0
    start = -1
    for index, char in enumerate(pattern):
        if char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                body = pattern[start + 1 : index]
                options = _split_top_level(body)
                if len(options) < 2:
                    continue
                head, tail = pattern[:start], pattern[index + 1 :]
                expanded: list[str] = []
                for option in options:
                    expanded.extend(_expand_braces(head + option + tail))
                return expanded
    return [pattern]


def _split_top_level(body: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for char in body:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += (char == "{") - (char == "}")
        current += char
    parts.append(current)
    return parts


def _segment_regex(segment: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(segment):
        char = segment[index]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = segment.find("]", index + 2)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = segment[index + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                index = end
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


def _translate(pattern: str) -> str:
    segments = [segment for segment in pattern.split("/") if segment not in ("", ".")]
    out: list[str] = []
    for position, segment in enumerate(segments):
        last = position == len(segments) - 1
        if segment == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
        else:
            out.append(_segment_regex(segment) + ("" if last else "/"))
    return "".join(out)


@dataclass(frozen=True, slots=True)
class GlobPattern:
    """A compiled glob: matches POSIX paths relative to the folder it is applied to."""

    source: str
    regex: re.Pattern[str]
    max_depth: int | None
    """Deepest path (in segments) that can match; ``None`` when ``**`` is present."""

    @classmethod
    def compile(cls, pattern: str, *, tool: str, argument: str = "pattern") -> GlobPattern:
        """Compile ``pattern``; :class:`ToolArgumentsInvalid` when it cannot be used."""
        alternatives = _expand_braces(pattern)
        if len(alternatives) > MAX_BRACE_EXPANSIONS:
            raise ToolArgumentsInvalid(
                f"{tool}: `{argument}` {pattern!r} expands to {len(alternatives)} alternatives "
                f"(at most {MAX_BRACE_EXPANSIONS}); use fewer `{{a,b}}` groups.",
                tool=tool,
                path=f"$.{argument}",
                reason="too many brace alternatives",
            )
        try:
            regex = re.compile("|".join(f"(?:{_translate(alt)})" for alt in alternatives))
        except re.error as exc:
            raise ToolArgumentsInvalid(
                f"{tool}: `{argument}` {pattern!r} is not a usable glob ({exc}).",
                tool=tool,
                path=f"$.{argument}",
                reason=str(exc),
            ) from exc
        depths = [len([s for s in alt.split("/") if s not in ("", ".")]) for alt in alternatives]
        deep = any("**" in alt.split("/") for alt in alternatives)
        return cls(source=pattern, regex=regex, max_depth=None if deep else max(depths))

    def matches(self, relative: str) -> bool:
        """Whether the POSIX relative path matches the whole pattern."""
        return self.regex.fullmatch(relative) is not None


def split_fixed_prefix(pattern: str) -> tuple[str, str]:
    """``src/lib/**/*.py`` -> (``src/lib``, ``**/*.py``): the literal folders walked to directly."""
    segments = pattern.split("/")
    fixed: list[str] = []
    for segment in segments[:-1]:
        if _MAGIC.search(segment):
            break
        fixed.append(segment)
    rest = "/".join(segments[len(fixed) :])
    prefix = "/".join(fixed)
    if pattern.startswith("/") and not prefix:
        prefix = "/"
    return prefix, rest


def walk_files(base: Path, *, max_depth: int | None = None) -> Iterator[tuple[Path, str]]:
    """Every file below ``base`` as (path, POSIX path relative to ``base``), in a stable order.

    Symlinked folders are not followed (no cycles); :data:`SKIPPED_DIRS` are not entered.
    """
    for folder, dirnames, filenames in os.walk(base, followlinks=False):
        relative_folder = Path(folder).relative_to(base)
        depth = len(relative_folder.parts)
        dirnames[:] = sorted(
            name
            for name in dirnames
            if name not in SKIPPED_DIRS and (max_depth is None or depth + 1 < max_depth)
        )
        for name in sorted(filenames):
            yield Path(folder, name), (relative_folder / name).as_posix()


def _glob(base: Path, pattern: GlobPattern, sort: str) -> list[Path]:
    if not base.exists():
        raise ToolFailed(f"Glob: the folder {base} does not exist.", tool=NAME, path=str(base))
    if not base.is_dir():
        raise ToolFailed(
            f"Glob: {base} is a file, not a folder; pass its folder as `path`.",
            tool=NAME,
            path=str(base),
        )
    found = [
        path for path, rel in walk_files(base, max_depth=pattern.max_depth) if pattern.matches(rel)
    ]
    if sort == "name":
        return sorted(found)

    def newest_first(path: Path) -> tuple[float, str]:
        try:
            return (-path.stat().st_mtime, str(path))
        except OSError:
            return (0.0, str(path))

    return sorted(found, key=newest_first)


async def handle(
    arguments: Mapping[str, Any], context: ToolContext, *, read_paths: Sequence[Path] = ()
) -> str:
    raw_pattern = str_arg(arguments, "pattern", tool=NAME)
    raw_base = optional_str_arg(arguments, "path", tool=NAME)
    sort = optional_str_arg(arguments, "sort", tool=NAME) or "mtime"
    if sort not in ("mtime", "name"):
        raise ToolArgumentsInvalid(
            "Glob: `sort` must be `mtime` or `name`.", tool=NAME, path="$.sort", reason="enum"
        )
    limit = int_arg(
        arguments, "limit", tool=NAME, default=DEFAULT_GLOB_LIMIT, minimum=1, maximum=MAX_GLOB_LIMIT
    )
    assert limit is not None
    fixed, rest = split_fixed_prefix(raw_pattern)
    base = resolve_path(raw_base or ".", context, tool=NAME, argument="path")
    if fixed:
        base = resolve_path(str(base / fixed), context, tool=NAME, argument="pattern")
    pattern = GlobPattern.compile(rest or "*", tool=NAME)
    chosen = base
    scope = await in_thread(lambda: read_scope_for(context, read_paths))
    scope = await approved_scope(chosen, scope, context, tool=NAME)
    found = await in_thread(_glob, base, pattern, sort)
    # A hidden place inside the folder searched (~/.ssh in a home folder named as a read root):
    # its names are not listed either.
    holes = [hole for hole in scope.holes() if hole.is_relative_to(base)]
    if holes:
        found = [path for path in found if not any(path.is_relative_to(h) for h in holes)]
    if not found:
        return f"No files match {raw_pattern!r} in {display_path(base, context)}."
    shown = [display_path(path, context) for path in found[:limit]]
    if len(found) > limit:
        shown.append(
            f"[{len(found) - limit} more files match; narrow the pattern or raise `limit`]"
        )
    return "\n".join(shown)
