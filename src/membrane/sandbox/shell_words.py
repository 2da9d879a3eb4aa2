"""Shell words for the shell guard: splitting a command, and expanding a word as far as the
text shows it.

:class:`Expander` turns one word of a command into the strings the shell would produce, in the
shell's order: braces, ``~``, variables, then (for paths) globs against the file system. It
knows the folder the command has reached, the environment, assignments made earlier in the
command and ``for`` lists. Whenever the text does not determine the result (an unknown variable,
``$1``, ``$@``, ``${x:-y}``, a command substitution, ``~-`` before any ``cd``) it answers
``None``, so the guard can fail closed instead of guessing an empty string.
"""

from __future__ import annotations

import glob
import itertools
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

__all__ = ["OPERATORS", "Expander", "is_operator", "quoted_substitutions", "tokens"]

#: Characters that split words into operators (``;``, ``|``, ``&&``, ``(``, ``>``...).
OPERATORS = "();<>|&\n"

#: More alternatives than this (braces, loop values, glob matches) count as unknowable.
MAX_ALTERNATIVES = 4096
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GLOB = re.compile(r"[*?\[]")


def _strip_comments(command: str) -> str:
    """``command`` without ``#`` comments (a ``#`` that starts a word outside quotes)."""
    out: list[str] = []
    quote = ""
    index = 0
    while index < len(command):
        char = command[index]
        if char == "\\" and quote != "'":
            out.append(command[index : index + 2])
            index += 2
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or command[index - 1] in " \t\n;&|()"):
            end = command.find("\n", index)
            index = len(command) if end == -1 else end
            continue
        out.append(char)
        index += 1
    return "".join(out)


def tokens(command: str) -> list[str]:
    """The words and operator runs of ``command``, quotes removed, comments dropped."""
    # Backquoted substitutions run as commands of their own: split at them.
    text = _strip_comments(command).replace("`", "\n")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=OPERATORS)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        # Unbalanced quotes (often in heredoc text): fall back to a quote-blind split.
        return re.findall(r"[();<>|&\n]+|[^\s();<>|&]+", text)


def is_operator(token: str) -> bool:
    return bool(token) and all(char in OPERATORS for char in token)


def quoted_substitutions(word: str) -> list[str]:
    """The scripts of ``$(...)`` substitutions inside one (quoted) word."""
    scripts: list[str] = []
    start = word.find("$(")
    while start != -1:
        depth, index = 0, start + 1
        while index < len(word):
            depth += {"(": 1, ")": -1}.get(word[index], 0)
            if depth == 0:
                break
            index += 1
        scripts.append(word[start + 2 : index])
        start = word.find("$(", index)
    return scripts


class Expander:
    """Expands words against what one command has established so far; mutable as it goes."""

    def __init__(
        self,
        *,
        cwd: Path,
        env: Mapping[str, str],
        lists: Mapping[str, list[str]] | None = None,
        oldpwd: Path | None = None,
    ) -> None:
        self.cwd = cwd
        self.env = dict(env)
        self.lists = dict(lists or {})
        self.oldpwd = oldpwd

    def copy(self) -> Expander:
        return Expander(cwd=self.cwd, env=self.env, lists=self.lists, oldpwd=self.oldpwd)

    def assign(self, name: str, value: str) -> None:
        values = self.values(value)
        if values is None or len(values) != 1:
            self.forget(name)
            return
        self.lists.pop(name, None)
        self.env[name] = values[0]

    def loop(self, name: str, words: list[str]) -> None:
        """``for name in words``: the variable takes each value in turn."""
        collected: list[str] = []
        for word in words:
            values = self.paths(word)
            if values is None:
                self.forget(name)
                return
            collected += values
        self.env.pop(name, None)
        self.lists[name] = collected

    def forget(self, name: str) -> None:
        """The variable's value is no longer known (``read``, a failed assignment...)."""
        self.env.pop(name, None)
        self.lists.pop(name, None)

    def change_directory(self, target: Path) -> None:
        self.oldpwd, self.cwd = self.cwd, target

    def values(self, word: str) -> list[str] | None:
        """Every string ``word`` may become (braces, ``~``, variables), or ``None``."""
        out: list[str] = []
        for alternative in _braces(word):
            tilde = self._tilde(alternative)
            if tilde is None:
                return None
            expanded = self._variables(tilde)
            if expanded is None:
                return None
            out += expanded
            if len(out) > MAX_ALTERNATIVES:
                return None
        return out

    def paths(self, word: str) -> list[str] | None:
        """:meth:`values`, with globs matched against the file system (the pattern itself
        stays among the answers, as the shell keeps it when nothing matches)."""
        values = self.values(word)
        if values is None:
            return None
        out: list[str] = []
        for value in values:
            if _GLOB.search(value):
                out += glob.glob(value, root_dir=self.cwd)
            out.append(value)
            if len(out) > MAX_ALTERNATIVES:
                return None
        return out

    def directories(self, destination: str) -> list[str] | None:
        """Where ``cd destination`` may go: ``~-`` and ``CDPATH`` included."""
        values = self.values(destination)
        if values is None:
            return None
        cdpath = self.env.get("CDPATH", "")
        if cdpath and not destination.startswith(("/", ".", "~")):
            values += [
                os.path.join(entry or ".", value) for entry in cdpath.split(":") for value in values
            ]
        return values

    def _tilde(self, word: str) -> str | None:
        if not word.startswith("~"):
            return word
        head, slash, rest = word.partition("/")
        if head == "~":
            home = self.env.get("HOME") or str(Path.home())
        elif head == "~+":
            home = str(self.cwd)
        elif head == "~-":
            if self.oldpwd is None:
                return None
            home = str(self.oldpwd)
        else:
            home = os.path.expanduser(head)  # ``~user``; an unknown user stays literal
        return home + slash + rest

    def _variables(self, word: str) -> list[str] | None:
        pieces: list[list[str]] = []
        index = literal_start = 0
        while (index := word.find("$", index)) != -1:
            following = word[index + 1 : index + 2]
            if not following or not (following.isalnum() or following in "_{(@*#?!$-"):
                index += 1
                continue
            if following == "{":
                end = word.find("}", index)
                name, after = word[index + 2 : end], end + 1
                if end == -1 or not _NAME.fullmatch(name):
                    return None  # ``${x:-y}``, ``${#x}``, ``${x[0]}``...
            else:
                match = _NAME.match(word, index + 1)
                if match is None:
                    return None  # ``$1``, ``$@``, ``$(...)``, ``$$``...
                name, after = match.group(), match.end()
            values = self._variable(name)
            if values is None:
                return None
            pieces += [[word[literal_start:index]], values]
            index = literal_start = after
        pieces.append([word[literal_start:]])
        combinations = 1
        for piece in pieces:
            combinations *= len(piece)
        if combinations > MAX_ALTERNATIVES:
            return None
        return ["".join(parts) for parts in itertools.product(*pieces)]

    def _variable(self, name: str) -> list[str] | None:
        if name == "PWD":
            return [str(self.cwd)]
        if name == "OLDPWD":
            return None if self.oldpwd is None else [str(self.oldpwd)]
        if name in self.lists:
            return self.lists[name]
        value = self.env.get(name)
        return None if value is None else [value]


def _braces(word: str) -> list[str]:
    """Brace alternatives of ``word`` (``a{b,c}`` -> ``ab``, ``ac``); sequences stay literal."""
    start = word.find("{")
    while start != -1:
        if start == 0 or word[start - 1] != "$":
            depth, commas = 0, []
            for index in range(start, len(word)):
                char = word[index]
                if char == "{":
                    depth += 1
                elif char == "}":
                    depth -= 1
                    if depth == 0:
                        break
                elif char == "," and depth == 1:
                    commas.append(index)
            else:
                return [word]
            if commas:
                bounds = [start, *commas, index]
                options = [word[a + 1 : b] for a, b in itertools.pairwise(bounds)]
                prefix, suffix = word[:start], word[index + 1 :]
                out: list[str] = []
                for option in options:
                    out += _braces(prefix + option + suffix)
                    if len(out) > MAX_ALTERNATIVES:
                        break
                return out
        start = word.find("{", start + 1)
    return [word]
