"""The simple commands of a shell command line, as permission rules match them.

``simple_commands("git log && rm -rf x")`` is ``git log`` and ``rm -rf x``: a rule such as
``Bash(git log:*)`` must hold for every command a line runs, not just its first words, so the
line is split at ``;``, ``&&``, ``||``, ``|``, ``&``, newlines and parentheses, and the scripts a
command runs in turn are read too: ``$(...)`` and backquoted substitutions, ``sh -c SCRIPT`` (and
``bash``, ``zsh``, ``dash``, ``ksh``), ``eval``, ``find -exec``. Leading assignments, reserved
words and prefix commands (``env``, ``sudo``, ``xargs``, ``timeout`` ...) are dropped, so
``env X=1 rm x`` is ``rm x``.

Each command comes as written and with its program's folder dropped (``/bin/rm x`` is also
``rm x``): a ``deny`` rule matches either, an ``allow`` rule only the command as written, so a
program of the same name elsewhere never borrows an allowance. A command whose program the
text does not determine (``$CMD x``, ``"$(pick)" x``, ``source f``, a script nested too deep) is
``None``: no rule can vouch for it.
"""

from __future__ import annotations

import os
from typing import Final, NamedTuple

from membrane.sandbox.shell_guard import _ASSIGNMENT, _strip_wrappers
from membrane.sandbox.shell_words import is_operator, quoted_substitutions, tokens

__all__ = ["SimpleCommand", "simple_commands"]

_SHELLS: Final = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
_SOURCES: Final = frozenset({"source", ".", "eval"})
_MAX_NESTING = 4
_MORE_KEYWORDS: Final = frozenset({"fi", "done", "esac", "then", "do", "else", "time", "!"})


class SimpleCommand(NamedTuple):
    """One command: its words joined by single spaces, as written and with the program's
    folder dropped."""

    written: str
    program_name: str


def simple_commands(command: str, *, depth: int = 0) -> list[SimpleCommand | None]:
    """Every simple command ``command`` runs, in order; ``None`` for one that cannot be read."""
    if depth > _MAX_NESTING:
        return [None]
    out: list[SimpleCommand | None] = []
    words: list[str] = []
    for token in [*tokens(command), ";"]:
        if is_operator(token) and not _redirection(token):
            out += _one(words, depth)
            words = []
        else:
            words.append(token)
    return out


def _redirection(token: str) -> bool:
    return ("<" in token or ">" in token) and not any(c in token for c in ";|()\n")


def _one(words: list[str], depth: int) -> list[SimpleCommand | None]:
    nested: list[SimpleCommand | None] = []
    for word in words:
        for script in quoted_substitutions(word):
            nested += simple_commands(script, depth=depth + 1)
    while words and (_ASSIGNMENT.match(words[0]) or words[0] in _MORE_KEYWORDS):
        words = words[1:]
    words = _strip_wrappers(words)[0]
    while words and words[0] in _MORE_KEYWORDS:
        words = words[1:]
    if not words:
        return nested
    program = words[0]
    if "$" in program or "`" in program or not program:
        return [*nested, None]
    name = os.path.basename(program)
    if name in _SOURCES:
        script = " ".join(words[1:])
        return [*nested, None] if name != "eval" else [*nested, *_nested(script, depth)]
    if name in _SHELLS and "-c" in words[1:]:
        index = words.index("-c", 1)
        script = words[index + 1] if index + 1 < len(words) else ""
        return [*nested, *_nested(script, depth)]
    if name == "find":
        nested += _find_exec(words, depth)
    written = " ".join(words)
    return [*nested, SimpleCommand(written, " ".join([name, *words[1:]]))]


def _nested(script: str, depth: int) -> list[SimpleCommand | None]:
    found = simple_commands(script, depth=depth + 1)
    return found if found else []


def _find_exec(words: list[str], depth: int) -> list[SimpleCommand | None]:
    """The commands of ``find ... -exec CMD ... ;`` (and ``-execdir``, ``-ok``, ``-okdir``)."""
    out: list[SimpleCommand | None] = []
    for index, word in enumerate(words):
        if word in ("-exec", "-execdir", "-ok", "-okdir"):
            rest = words[index + 1 :]
            end = next((i for i, w in enumerate(rest) if w in (";", "+")), len(rest))
            out += _one(rest[:end], depth + 1)
    return out
