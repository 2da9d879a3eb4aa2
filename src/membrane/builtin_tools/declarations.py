"""What each built-in tool is: its name, description, input schema and whether it mutates.

Declaring the tools (a registry, ``membrane explain``, a listing) imports none of the code that
runs them: a tool's handler imports its module (``membrane.builtin_tools.read``, ``grep``...)
on the tool's first call. ``Bash`` is declared by ``membrane.builtin_tools.bash`` itself, beside
the sandbox it configures.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from membrane.builtin_tools.tool_limits import (
    BROWSER_EXECUTABLES,
    BROWSER_MAX_TIMEOUT,
    BROWSER_TIMEOUT,
    DEFAULT_GLOB_LIMIT,
    DEFAULT_GREP_LIMIT,
    DEFAULT_READ_LINES,
    GREP_TIME_LIMIT,
    MAX_CONTEXT_LINES,
    MAX_DOM_BYTES,
    MAX_GLOB_LIMIT,
    MAX_GREP_FILE_BYTES,
    MAX_GREP_LIMIT,
    OUTPUT_MODES,
    READ_LINE_CHARS,
    REFUSED_SYNTAX,
    SKIPPED_DIRS,
)
from membrane.errors import ToolSpecError
from membrane.json_types import JSONObject
from membrane.sandbox.executables import which
from membrane.tools.spec import Tool, ToolContext, ToolHandler

__all__ = [
    "browser_preview_tool",
    "edit_tool",
    "find_browser",
    "glob_tool",
    "grep_tool",
    "read_tool",
    "write_tool",
]

# Read ---------------------------------------------------------------------------------------

READ_DESCRIPTION = f"""\
Read a text file and return its lines, each prefixed with its 1-based line number and a tab.

- `file_path`: absolute, or relative to the checkout (your working directory). Files outside \
the checkout may be read.
- `offset` (1-based line to start at) and `limit` (number of lines, at most \
{DEFAULT_READ_LINES}) page through long files; by default the first {DEFAULT_READ_LINES} lines \
are returned and a note says how to continue.
- Lines longer than {READ_LINE_CHARS} characters are cut. Binary files, directories, named \
pipes and devices are refused: use Glob to list a directory.
- The line-number prefix is not part of the file: leave it out when you quote the file's text."""

READ_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "file_path": {
            "type": "string",
            "minLength": 1,
            "description": "Path of the file, absolute or relative to the checkout.",
        },
        "offset": {
            "type": "integer",
            "minimum": 1,
            "description": "1-based line number to start reading at (default 1).",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": DEFAULT_READ_LINES,
            "description": f"How many lines to return (default and maximum {DEFAULT_READ_LINES}).",
        },
    },
    "required": ["file_path"],
    "additionalProperties": False,
}


def read_tool(*, read_paths: Sequence[Path] = ()) -> Tool:
    """The ``Read`` tool (not mutating); ``read_paths``: the read roots a child may read besides
    its checkout and the system's folders (:mod:`membrane.sandbox.reads`)."""
    roots = tuple(read_paths)
    return _declared("Read", READ_DESCRIPTION, READ_SCHEMA, lambda: _read(roots), mutating=False)


def _read(read_paths: tuple[Path, ...]) -> ToolHandler:
    from membrane.builtin_tools.read import handle

    return functools.partial(handle, read_paths=read_paths)


# Glob ---------------------------------------------------------------------------------------

GLOB_DESCRIPTION = f"""\
Find files by name pattern, e.g. `**/*.py`, `src/**/test_*.py` or `docs/*.{{md,rst}}`.

- The pattern is relative to `path` (default: the checkout). `*` and `?` match within one \
folder name, `**` matches any number of folders, `{{a,b}}` gives alternatives.
- Only files are listed, as paths relative to the checkout (absolute when outside it), sorted \
by modification time, newest first (`sort: "name"` sorts alphabetically instead).
- At most `limit` paths are returned (default {DEFAULT_GLOB_LIMIT}); a note says how many \
more matched.
- Version-control and cache folders ({", ".join(sorted(SKIPPED_DIRS))}) are skipped."""

GLOB_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "minLength": 1,
            "description": "Glob pattern, e.g. `**/*.ts` (relative to `path`).",
        },
        "path": {
            "type": "string",
            "minLength": 1,
            "description": "Folder to search, absolute or relative to the checkout (default: "
            "the checkout).",
        },
        "sort": {
            "type": "string",
            "enum": ["mtime", "name"],
            "description": "`mtime` (default): newest first. `name`: alphabetical by path.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_GLOB_LIMIT,
            "description": f"Largest number of paths to return (default {DEFAULT_GLOB_LIMIT}).",
        },
    },
    "required": ["pattern"],
    "additionalProperties": False,
}


def glob_tool(*, read_paths: Sequence[Path] = ()) -> Tool:
    """The ``Glob`` tool (not mutating); ``read_paths`` as for :func:`read_tool`."""
    roots = tuple(read_paths)
    return _declared("Glob", GLOB_DESCRIPTION, GLOB_SCHEMA, lambda: _glob(roots), mutating=False)


def _glob(read_paths: tuple[Path, ...]) -> ToolHandler:
    from membrane.builtin_tools.glob_tool import handle

    return functools.partial(handle, read_paths=read_paths)


# Grep ---------------------------------------------------------------------------------------

GREP_DESCRIPTION = f"""\
Search file contents with a regular expression (RE2 syntax, as ripgrep: e.g. `def \\w+\\(`, \
`TODO|FIXME`), line by line. RE2 runs in linear time and refuses {REFUSED_SYNTAX}.

- `path`: a file or folder, absolute or relative to the checkout (default: the checkout).
- `glob`: only search files matching this pattern (`*.py`, `**/*.{{ts,tsx}}`); a pattern \
without `/` matches file names in any folder.
- `output_mode`: `files_with_matches` (default: the paths of matching files), `content` \
(matching lines as `path:line:text`, with `context` lines around them as `path-line-text`), \
or `count` (matches per file as `path:N`).
- `case_insensitive: true` ignores case. Results come in path order; at most `limit` entries \
(default {DEFAULT_GREP_LIMIT}) are returned, with a note when more exist.
- Binary files, named pipes, devices, files over {MAX_GREP_FILE_BYTES // (1024 * 1024)} MiB \
and version-control or cache folders ({", ".join(sorted(SKIPPED_DIRS))}) are skipped."""

GREP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "minLength": 1,
            "description": "Regular expression (RE2 syntax) searched in each line.",
        },
        "path": {
            "type": "string",
            "minLength": 1,
            "description": "File or folder to search (default: the checkout).",
        },
        "glob": {
            "type": "string",
            "minLength": 1,
            "description": "Only search files matching this glob, e.g. `*.py`.",
        },
        "output_mode": {
            "type": "string",
            "enum": list(OUTPUT_MODES),
            "description": "`files_with_matches` (default), `content` or `count`.",
        },
        "case_insensitive": {
            "type": "boolean",
            "description": "Match regardless of case (default false).",
        },
        "context": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_CONTEXT_LINES,
            "description": "Lines of context before and after each match (content mode only).",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_GREP_LIMIT,
            "description": "Largest number of files, lines or counts returned "
            f"(default {DEFAULT_GREP_LIMIT}).",
        },
    },
    "required": ["pattern"],
    "additionalProperties": False,
}


def grep_tool(*, time_limit: float = GREP_TIME_LIMIT, read_paths: Sequence[Path] = ()) -> Tool:
    """The ``Grep`` tool (not mutating); each call searches for at most ``time_limit`` seconds.
    ``read_paths`` as for :func:`read_tool`."""
    roots = tuple(read_paths)
    if not time_limit >= 0:
        raise ToolSpecError(f"Grep: time_limit must be at least 0 seconds (got {time_limit!r}).")

    async def handle(arguments: Mapping[str, Any], context: ToolContext) -> str:
        from membrane.builtin_tools.grep import handle as search

        return await search(arguments, context, time_limit=time_limit, read_paths=roots)

    return Tool(
        name="Grep",
        description=GREP_DESCRIPTION,
        input_schema=GREP_SCHEMA,
        handler=handle,
        mutating=False,
    )


# Edit ---------------------------------------------------------------------------------------
EDIT_DESCRIPTION = """\
Replace exact text in an existing file inside the checkout.

- `old_string` must appear in the file exactly as given (whitespace and indentation included, \
without the line-number prefix that Read adds). Read the file first.
- When `old_string` appears more than once, the edit fails: include more surrounding lines \
to make it unique, or pass `replace_all: true` to replace every occurrence.
- `new_string` must differ from `old_string`. To create a file, use Write.
- Files outside the checkout cannot be edited."""

EDIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "file_path": {
            "type": "string",
            "minLength": 1,
            "description": "File to edit, absolute or relative to the checkout.",
        },
        "old_string": {
            "type": "string",
            "minLength": 1,
            "description": "The exact text to replace.",
        },
        "new_string": {
            "type": "string",
            "description": "The text to put in its place (may be empty to delete).",
        },
        "replace_all": {
            "type": "boolean",
            "description": "Replace every occurrence instead of requiring exactly one "
            "(default false).",
        },
    },
    "required": ["file_path", "old_string", "new_string"],
    "additionalProperties": False,
}


def edit_tool() -> Tool:
    """The ``Edit`` tool (mutating: refuses paths outside the checkout)."""
    return _declared("Edit", EDIT_DESCRIPTION, EDIT_SCHEMA, _edit, mutating=True)


def _edit() -> ToolHandler:
    from membrane.builtin_tools.edit import handle

    return handle


# Write --------------------------------------------------------------------------------------
WRITE_DESCRIPTION = """\
Create a text file, or replace the whole content of an existing one, inside the checkout.

- `file_path`: absolute, or relative to the checkout. Missing parent folders are created.
- `content` is written exactly as given (UTF-8). An existing file is overwritten entirely: \
to change part of a file, prefer Edit.
- Files outside the checkout cannot be written."""

WRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "file_path": {
            "type": "string",
            "minLength": 1,
            "description": "File to write, absolute or relative to the checkout.",
        },
        "content": {"type": "string", "description": "The complete new content of the file."},
    },
    "required": ["file_path", "content"],
    "additionalProperties": False,
}


def write_tool() -> Tool:
    """The ``Write`` tool (mutating: refuses paths outside the checkout)."""
    return _declared("Write", WRITE_DESCRIPTION, WRITE_SCHEMA, _write, mutating=True)


def _write() -> ToolHandler:
    from membrane.builtin_tools.write import handle

    return handle


# BrowserPreview -----------------------------------------------------------------------------

BROWSER_DESCRIPTION = f"""\
Render a web page in a headless browser and return its DOM or a screenshot.

- `url`: an http(s) or file URL, or the path of a local HTML file (absolute or relative to \
the checkout).
- `mode`: `dom` (default) returns the serialized DOM after scripts ran (at most \
{MAX_DOM_BYTES} bytes); `screenshot` saves a PNG of `width` x `height` pixels (default \
1280 x 800) to a temporary file and returns its path.
- `timeout` in seconds (default {BROWSER_TIMEOUT:g}, at most {BROWSER_MAX_TIMEOUT:g})."""

BROWSER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {
            "type": "string",
            "minLength": 1,
            "description": "http(s)/file URL, or a local HTML file path.",
        },
        "mode": {
            "type": "string",
            "enum": ["dom", "screenshot"],
            "description": "`dom` (default) or `screenshot`.",
        },
        "width": {"type": "integer", "minimum": 100, "maximum": 4000},
        "height": {"type": "integer", "minimum": 100, "maximum": 4000},
        "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": BROWSER_MAX_TIMEOUT},
    },
    "required": ["url"],
    "additionalProperties": False,
}


def find_browser() -> str | None:
    """The path of the first Chromium-family executable on ``PATH``, or ``None``."""
    for name in BROWSER_EXECUTABLES:
        found = which(name)
        if found is not None:
            return found
    return None


def browser_preview_tool(executable: str) -> Tool:
    """The ``BrowserPreview`` tool driving ``executable`` (not mutating)."""

    async def handle(arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        from membrane.builtin_tools.browser import preview

        return await preview(arguments, context, executable=executable)

    return Tool(
        name="BrowserPreview",
        description=BROWSER_DESCRIPTION,
        input_schema=BROWSER_SCHEMA,
        handler=handle,
        mutating=False,
    )


def _declared(
    name: str,
    description: str,
    schema: dict[str, Any],
    load: Callable[[], ToolHandler],
    *,
    mutating: bool,
) -> Tool:
    """A tool whose handler ``load`` imports on the tool's first call."""

    async def handle(arguments: JSONObject, context: ToolContext) -> object:
        return await load()(arguments, context)

    return Tool(
        name=name, description=description, input_schema=schema, handler=handle, mutating=mutating
    )
