"""``Grep``: a regular-expression search over files, no ripgrep needed.

Patterns run on RE2 (:mod:`membrane.builtin_tools.linear_regex`), in time linear in the input
whatever the pattern, in a worker thread that does not hold the interpreter lock while it
matches; each call is bounded in time (:data:`GREP_TIME_LIMIT`) and output
(:data:`MAX_OUTPUT_CHARS`), so no pattern can freeze the process or flood the model.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membrane.builtin_tools._support import (
    BINARY_SNIFF_BYTES,
    bool_arg,
    file_kind,
    in_thread,
    int_arg,
    looks_binary,
    open_regular,
    optional_str_arg,
    str_arg,
)
from membrane.builtin_tools.glob_tool import GlobPattern, walk_files
from membrane.builtin_tools.linear_regex import LinearPattern, compile_linear
from membrane.builtin_tools.paths import (
    approved_scope,
    display_path,
    read_scope_for,
    resolve_path,
)
from membrane.builtin_tools.tool_limits import (
    DEFAULT_GREP_LIMIT,
    GREP_TIME_LIMIT,
    MAX_CONTEXT_LINES,
    MAX_GREP_FILE_BYTES,
    MAX_GREP_LIMIT,
    OUTPUT_MODES,
    OutputMode,
)
from membrane.errors import ToolArgumentsInvalid, ToolFailed
from membrane.sandbox.reads import ReadScope
from membrane.tools.spec import ToolContext

__all__ = [
    "DEFAULT_GREP_LIMIT",
    "GREP_TIME_LIMIT",
    "MAX_GREP_FILE_BYTES",
    "handle",
]

NAME = "Grep"
MAX_LINE_CHARS = 500
MAX_OUTPUT_CHARS = 60_000
#: Lines searched between two looks at the clock.
_CLOCK_EVERY = 4096


@dataclass(slots=True)
class _Search:
    regex: LinearPattern
    mode: OutputMode
    context: int
    limit: int
    deadline: float
    time_limit: float
    searched: int = 0
    entries: list[str] = field(default_factory=list)
    chars: int = 0
    omitted: int = 0
    matched_files: int = 0
    matches: int = 0
    too_large: list[str] = field(default_factory=list)

    def check_clock(self) -> None:
        if time.monotonic() >= self.deadline:
            raise ToolFailed(
                f"Grep: the search stopped after {self.time_limit:g} seconds (its time bound), "
                f"having searched {self.searched} files; narrow it with `path` or `glob`.",
                tool=NAME,
                limit="time",
                seconds=self.time_limit,
                searched_files=self.searched,
            )

    def add(self, entry: str) -> None:
        if len(self.entries) >= self.limit or self.chars + len(entry) > MAX_OUTPUT_CHARS:
            self.omitted += 1
            return
        self.entries.append(entry)
        self.chars += len(entry) + 1


def _candidates(base: Path, glob: GlobPattern | None) -> Iterator[tuple[Path, str]]:
    if not base.is_dir():
        yield base, base.name
        return
    for path, relative in walk_files(base):
        target = relative if glob is None or "/" in glob.source else path.name
        if glob is None or glob.matches(target):
            yield path, relative


def _lines(path: Path) -> list[str] | None:
    """The file's lines, or ``None`` when it is binary, unreadable or not a regular file."""
    try:
        with open_regular(path) as handle:
            head = handle.read(BINARY_SNIFF_BYTES)
            if looks_binary(head):
                return None
            data = head + handle.read()
    except OSError:
        return None
    return data.decode("utf-8", errors="replace").splitlines()


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " [...]"


def _search_file(search: _Search, lines: list[str], shown: str) -> None:
    hits: list[int] = []
    for number, line in enumerate(lines):
        if number % _CLOCK_EVERY == 0:
            search.check_clock()
        if search.regex.search(line) is not None:
            hits.append(number)
    search.searched += 1
    if not hits:
        return
    search.matched_files += 1
    search.matches += len(hits)
    if search.mode == "files_with_matches":
        search.add(shown)
        return
    if search.mode == "count":
        search.add(f"{shown}:{len(hits)}")
        return
    hit_set = set(hits)
    previous_end = -1
    for number in hits:
        start = max(number - search.context, 0, previous_end + 1)
        if search.context and previous_end >= 0 and start > previous_end + 1:
            search.add("--")
        end = min(number + search.context, len(lines) - 1)
        for index in range(start, end + 1):
            mark = ":" if index in hit_set else "-"
            search.add(f"{shown}{mark}{index + 1}{mark}{_cut(lines[index])}")
        previous_end = max(previous_end, end)


def _grep(
    base: Path, glob: GlobPattern | None, search: _Search, context: ToolContext, scope: ReadScope
) -> str:
    if not base.exists():
        raise ToolFailed(f"Grep: {base} does not exist.", tool=NAME, path=str(base))
    for path, _relative in _candidates(base, glob):
        search.check_clock()
        shown = display_path(path, context)
        try:
            status = path.stat()
        except OSError:
            continue
        if file_kind(status.st_mode) is not None:
            continue  # named pipes, sockets and devices are not searched (a FIFO would block)
        if not scope.allows(path):
            continue  # a link to a place no child reads (~/.ssh, $MEMBRANE_HOME, ...)
        if status.st_size > MAX_GREP_FILE_BYTES:
            search.too_large.append(shown)
            continue
        lines = _lines(path)
        if lines is not None:
            _search_file(search, lines, shown)
    where = display_path(base, context)
    if not search.matched_files:
        return f"No matches for /{search.regex.pattern}/ in {where}."
    out = list(search.entries)
    if search.omitted:
        out.append(f"[{search.omitted} more entries not shown; narrow the search or raise `limit`]")
    if search.mode == "count":
        out.append(f"[{search.matches} matching lines in {search.matched_files} files]")
    if search.too_large:
        out.append(
            f"[skipped files larger than {MAX_GREP_FILE_BYTES} bytes: "
            + ", ".join(search.too_large[:10])
            + "]"
        )
    return "\n".join(out)


async def handle(
    arguments: Mapping[str, Any],
    context: ToolContext,
    *,
    time_limit: float,
    read_paths: Sequence[Path] = (),
) -> str:
    pattern = str_arg(arguments, "pattern", tool=NAME)
    raw_mode = optional_str_arg(arguments, "output_mode", tool=NAME) or "files_with_matches"
    mode = next((known for known in OUTPUT_MODES if known == raw_mode), None)
    if mode is None:
        raise ToolArgumentsInvalid(
            f"Grep: `output_mode` must be one of {', '.join(OUTPUT_MODES)} (got {raw_mode!r}).",
            tool=NAME,
            path="$.output_mode",
            reason="enum",
        )
    regex = compile_linear(
        pattern,
        ignore_case=bool_arg(arguments, "case_insensitive", tool=NAME, default=False),
        tool=NAME,
    )
    raw_glob = optional_str_arg(arguments, "glob", tool=NAME)
    glob = GlobPattern.compile(raw_glob, tool=NAME, argument="glob") if raw_glob else None
    context_lines = int_arg(
        arguments, "context", tool=NAME, default=0, minimum=0, maximum=MAX_CONTEXT_LINES
    )
    limit = int_arg(
        arguments, "limit", tool=NAME, default=DEFAULT_GREP_LIMIT, minimum=1, maximum=MAX_GREP_LIMIT
    )
    search = _Search(
        regex=regex,
        mode=mode,
        context=context_lines or 0,
        limit=limit or DEFAULT_GREP_LIMIT,
        deadline=time.monotonic() + time_limit,
        time_limit=time_limit,
    )
    base = resolve_path(
        optional_str_arg(arguments, "path", tool=NAME) or ".", context, tool=NAME, argument="path"
    )
    scope = await in_thread(lambda: read_scope_for(context, read_paths))
    scope = await approved_scope(base, scope, context, tool=NAME)
    # A stalled file system must not make the call uncancellable.
    return await in_thread(_grep, base, glob, search, context, scope, abandon_on_cancel=True)
