"""Regular expressions that run in linear time: RE2 (``google-re2``), the engine of ripgrep's
guarantee.

A backtracking engine (Python's ``re``) can take exponential time on a pattern such as
``(a|aa)+$``, and holds the interpreter lock while it does: one read-only child's ``Grep`` would
freeze every agent in the process. RE2 matches in time linear in the input whatever the pattern,
and releases the interpreter lock while it matches. The price is syntax it refuses, because no
linear-time engine can offer it: backreferences (``\\1``, ``(?P=name)``), lookahead and
lookbehind (``(?=``, ``(?!``, ``(?<=``, ``(?<!``), atomic groups (``(?>``), possessive
quantifiers (``a++``) and ``\\Z`` (use ``\\z`` or ``$``).
"""

from __future__ import annotations

from typing import Protocol, cast

from membrane.builtin_tools.tool_limits import REFUSED_SYNTAX
from membrane.errors import ToolArgumentsInvalid

__all__ = ["REFUSED_SYNTAX", "LinearPattern", "compile_linear"]


class LinearPattern(Protocol):
    """The part of a compiled RE2 pattern the tools use."""

    @property
    def pattern(self) -> str: ...

    def search(self, text: str) -> object | None: ...


def compile_linear(pattern: str, *, ignore_case: bool, tool: str) -> LinearPattern:
    """``pattern`` compiled by RE2; :class:`ToolArgumentsInvalid` (at ``$.pattern``) naming what
    RE2 refused, and the syntax it never accepts."""
    # Imported on the first pattern: declaring the tools (``membrane explain``) needs no engine.
    import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    try:
        return cast(LinearPattern, re2.compile(pattern, options))
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        reason = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
        raise ToolArgumentsInvalid(
            f"{tool}: {pattern!r} is not a pattern the linear-time engine (RE2) accepts: "
            f"{reason}. RE2 refuses {REFUSED_SYNTAX}; escape literal characters such as `(`, "
            "`[` or `\\` with a backslash.",
            tool=tool,
            path="$.pattern",
            reason=reason,
        ) from exc
