"""How deeply a JSON or YAML text nests, found in one pass before any parser recurses into it.

A hostile project file (``opencode.json`` with ``[[[[...``, a frontmatter of ``- - - - ...``)
would otherwise cost a recursive parser seconds of CPU, or a ``RecursionError``, before any
depth check on the parsed value could refuse it, on every command that reads the catalog.
``too_deep`` scans the text once, counting the collections that open (flow brackets outside
strings and comments, and for YAML the ``- ``/``? `` entries that open a nested block collection
on one line), and names the line where the count first passes the limit.

The scan is deliberately simple: it may count a bracket inside a plain (unquoted) YAML scalar,
so a scalar holding dozens of unmatched ``[`` is refused too. No definition needs that; a
definition needs at most a few levels (a list of names, a map of rules, a hook's matcher list).
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = ["MAX_NESTING", "too_deep"]

#: The deepest collection a definition or an agents config file may hold.
MAX_NESTING: Final = 64

_OPEN: Final = frozenset("[{")
_CLOSE: Final = frozenset("]}")
#: Characters after which a YAML quote opens a quoted scalar (elsewhere it is part of a word).
_BEFORE_QUOTE: Final = frozenset(" \t\n[{,:-?")


def too_deep(text: str, *, flavor: Literal["json", "yaml"], limit: int = MAX_NESTING) -> int | None:
    """The 1-based line where ``text`` first nests deeper than ``limit``; ``None`` when it
    never does. Linear in the length of ``text``."""
    depth = 0
    line = 1
    quote = ""
    at_line_start = True
    previous = "\n"
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "\n":
            line += 1
            at_line_start = True
            previous = char
            i += 1
            if quote == "'" or (quote == '"' and flavor == "json"):
                quote = ""  # an unclosed string: the parser will report it; keep counting
            continue
        if quote:
            if quote == '"' and char == "\\":
                i += 2
                continue
            if char == quote:
                if quote == "'" and text.startswith("''", i):
                    i += 2  # YAML's escaped single quote
                    continue
                quote = ""
            previous = char
            i += 1
            continue
        if flavor == "yaml":
            if char == "#" and previous in " \t\n":
                end = text.find("\n", i)
                i = n if end < 0 else end
                continue
            if at_line_start and char in " \t":
                i += 1
                continue
            if at_line_start:
                # `- - - x` and `? ? x` open one block collection per indicator on one line.
                entries = 0
                while i + 1 < n and text[i] in "-?" and text[i + 1] in " \t":
                    entries += 1
                    i += 2
                    while i < n and text[i] in " \t":
                        i += 1
                at_line_start = False
                if entries > limit:
                    return line
                if entries:
                    previous = " "
                continue  # the character at ``i`` is read again, past the line's start
            if char in "'\"" and previous in _BEFORE_QUOTE:
                quote = char
                previous = char
                i += 1
                continue
        elif char == '"':
            quote = char
            previous = char
            i += 1
            continue
        at_line_start = False
        if char in _OPEN:
            depth += 1
            if depth > limit:
                return line
        elif char in _CLOSE and depth:
            depth -= 1
        previous = char
        i += 1
    return None
