"""The limits and fixed vocabularies of the built-in tools, shared by their declarations
(``membrane.builtin_tools.declarations``, which quote them in descriptions and schemas) and
their handlers (which enforce them)."""

from __future__ import annotations

from typing import Literal

__all__ = [
    "BROWSER_EXECUTABLES",
    "BROWSER_MAX_TIMEOUT",
    "BROWSER_TIMEOUT",
    "DEFAULT_GLOB_LIMIT",
    "DEFAULT_GREP_LIMIT",
    "DEFAULT_READ_LINES",
    "GREP_TIME_LIMIT",
    "MAX_CONTEXT_LINES",
    "MAX_DOM_BYTES",
    "MAX_GLOB_LIMIT",
    "MAX_GREP_FILE_BYTES",
    "MAX_GREP_LIMIT",
    "OUTPUT_MODES",
    "READ_LINE_CHARS",
    "REFUSED_SYNTAX",
    "SKIPPED_DIRS",
    "OutputMode",
]

# Read
#: Lines returned when the call gives no ``limit``; also the largest ``limit`` accepted.
DEFAULT_READ_LINES = 2000
#: A longer line is cut, with a marker, so one minified file cannot flood the context.
READ_LINE_CHARS = 2000

# Glob
DEFAULT_GLOB_LIMIT = 200
MAX_GLOB_LIMIT = 2000
#: Folder names a walk never descends into: version control metadata and tool caches.
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        "node_modules",
    }
)

# Grep
OutputMode = Literal["files_with_matches", "content", "count"]
OUTPUT_MODES: tuple[OutputMode, ...] = ("files_with_matches", "content", "count")
DEFAULT_GREP_LIMIT = 200
MAX_GREP_LIMIT = 2000
MAX_CONTEXT_LINES = 10
#: Larger files are skipped (and reported): a search must stay quick and its answer small.
MAX_GREP_FILE_BYTES = 20 * 1024 * 1024
#: Seconds one call may search before it stops with an error.
GREP_TIME_LIMIT = 30.0

# BrowserPreview
#: Executable names tried, in order, on ``PATH``.
BROWSER_EXECUTABLES = (
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chrome",
)
BROWSER_TIMEOUT = 30.0
BROWSER_MAX_TIMEOUT = 120.0
MAX_DOM_BYTES = 100_000

#: The regular expression syntax RE2 refuses (``membrane.builtin_tools.linear_regex``), as
#: Grep's description and its errors name it.
REFUSED_SYNTAX = (
    "backreferences (\\1, (?P=name)), lookahead and lookbehind ((?=, (?!, (?<=, (?<!), atomic "
    "groups ((?>...)), possessive quantifiers (a++) and \\Z (use \\z or $)"
)
