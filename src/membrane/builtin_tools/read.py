"""``Read``: a text file with line numbers, a window at a time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from membrane.builtin_tools._support import (
    BINARY_SNIFF_BYTES,
    NotRegularFile,
    in_thread,
    int_arg,
    looks_binary,
    open_regular,
    str_arg,
)
from membrane.builtin_tools.paths import (
    approved_scope,
    display_path,
    read_scope_for,
    resolve_path,
)
from membrane.builtin_tools.tool_limits import DEFAULT_READ_LINES
from membrane.builtin_tools.tool_limits import READ_LINE_CHARS as MAX_LINE_CHARS
from membrane.errors import ToolFailed
from membrane.tools.spec import ToolContext

__all__ = ["DEFAULT_READ_LINES", "MAX_LINE_CHARS", "MAX_READ_CHARS", "handle"]

NAME = "Read"
#: The whole answer stops growing past this many characters, with a note saying where to go on.
MAX_READ_CHARS = 200_000


def _suggestion(path: Path) -> str:
    parent = path.parent
    if not parent.is_dir():
        return f" The folder {parent} does not exist either."
    try:
        siblings = [entry.name for entry in parent.iterdir()]
    except OSError:
        return ""
    import difflib  # only for a file that is not there

    close = difflib.get_close_matches(path.name, siblings, n=3, cutoff=0.6)
    if close:
        return " Did you mean: " + ", ".join(close) + "?"
    return " Use Glob to find the file."


def _read(path: Path, shown: str, offset: int, limit: int) -> str:
    try:
        handle = open_regular(path)
    except FileNotFoundError as exc:
        raise ToolFailed(
            f"Read: {shown} does not exist.{_suggestion(path)}", tool=NAME, path=str(path)
        ) from exc
    except NotRegularFile as exc:
        if exc.kind == "a directory":
            raise ToolFailed(
                f"Read: {shown} is a directory, not a file. Use Glob to list what it contains.",
                tool=NAME,
                path=str(path),
            ) from exc
        raise ToolFailed(
            f"Read: {shown} is {exc.kind}, not a regular file; only regular files can be read.",
            tool=NAME,
            path=str(path),
        ) from exc
    except OSError as exc:
        raise ToolFailed(
            f"Read: cannot open {shown}: {exc.strerror or exc}.", tool=NAME, path=str(path)
        ) from exc
    with handle:
        if looks_binary(handle.read(BINARY_SNIFF_BYTES)):
            raise ToolFailed(
                f"Read: {shown} is a binary file; only text files can be read.",
                tool=NAME,
                path=str(path),
            )
        handle.seek(0)
        out: list[str] = []
        size = 0
        total = 0
        last_shown = offset - 1
        cut_lines = 0
        budget_hit = False
        for total, raw in enumerate(handle, start=1):
            if total < offset or total >= offset + limit or budget_hit:
                continue
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + f" [... line cut at {MAX_LINE_CHARS} characters]"
                cut_lines += 1
            entry = f"{total:>6}\t{line}"
            if size + len(entry) > MAX_READ_CHARS and out:
                budget_hit = True
                continue
            out.append(entry)
            size += len(entry) + 1
            last_shown = total
    if total == 0:
        return f"[{shown} is empty]"
    if offset > total:
        raise ToolFailed(
            f"Read: offset {offset} is past the end of {shown}, which has {total} lines.",
            tool=NAME,
            path=str(path),
        )
    notes: list[str] = []
    if last_shown < total:
        why = f"output limit of {MAX_READ_CHARS} characters" if budget_hit else "line limit"
        notes.append(
            f"[showing lines {offset}-{last_shown} of {total} ({why}); "
            f"call Read with offset={last_shown + 1} to continue]"
        )
    elif offset > 1:
        notes.append(f"[showing lines {offset}-{last_shown} of {total}]")
    if cut_lines:
        notes.append(f"[{cut_lines} long line(s) were cut at {MAX_LINE_CHARS} characters]")
    return "\n".join(out + notes)


async def handle(
    arguments: Mapping[str, Any], context: ToolContext, *, read_paths: Sequence[Path] = ()
) -> str:
    raw = str_arg(arguments, "file_path", tool=NAME)
    offset = int_arg(arguments, "offset", tool=NAME, default=1, minimum=1) or 1
    limit = (
        int_arg(
            arguments,
            "limit",
            tool=NAME,
            default=DEFAULT_READ_LINES,
            minimum=1,
            maximum=DEFAULT_READ_LINES,
        )
        or DEFAULT_READ_LINES
    )
    path = resolve_path(raw, context, tool=NAME)
    shown = display_path(path, context)
    scope = await in_thread(lambda: read_scope_for(context, read_paths))
    await approved_scope(path, scope, context, tool=NAME, shown=raw)
    # A stalled file system must not make the call uncancellable.
    return await in_thread(_read, path, shown, offset, limit, abandon_on_cancel=True)
