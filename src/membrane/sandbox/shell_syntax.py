"""The words of a shell command line as bash will read them, for the ``Bash`` permission rules.

:func:`parse` splits a line into simple commands and each command into :class:`Word` values.
Quotes are removed (``'...'``, ``"..."``, ``$'...'`` with its escapes, backslashes); expansions
stay as written (``$x``, ``$(...)``, ``${...}``, ``$((...))``), and every command substitution,
backquoted or not, process substitution (``<(...)``) and unquoted here-document body gives its
script, which runs before the command and is read as a command line of its own. A word also
says what the shell may still do to it: expand it (``expands``), glob it from its first
character (``globs``), or evaluate data as code (``evaluates``: arithmetic over names,
``${x@P}``, ``${!x}``, subscripts). Redirections stay in the command, marked, with their target.

This is a reader for rules, not a shell: what it cannot follow (an unterminated quote or
substitution) runs to the end of the line, so a script it reads is never shorter than bash's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["TooDeep", "Word", "parse", "scripts_in"]

#: Characters that end a word and start an operator.
_OPERATORS = ";&|()<>\n"
_CONTROL = ("&&", "||", ";;&", ";;", ";&", "|&", ";", "&", "|", "\n", "(", ")")
_REDIRECTIONS = ("<<<", "<<-", "&>>", "<<", "<>", "<&", ">>", ">&", ">|", "&>", "<", ">")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Runs of characters with no meaning to the reader, in a word, in double quotes, in ``$'...'``.
_PLAIN = re.compile(r"[^ \t\r'\"\\$`;&|()<>\n]+")
_PLAIN_DOUBLE = re.compile(r"[^\"\\$`]+")
_PLAIN_ANSI = re.compile(r"[^'\\]+")
#: Expansions nested deeper than this are not read (the line then counts as unreadable).
MAX_DEPTH = 32


class TooDeep(ValueError):
    """A line nests quotes and expansions deeper than :data:`MAX_DEPTH`."""


_ANSI = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
         "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}  # fmt: skip


@dataclass(slots=True)
class Word:
    """One word: ``text`` with quotes removed and expansions as written."""

    text: str = ""
    #: Scripts of the command substitutions in the word (they run before the command).
    scripts: list[str] = field(default_factory=list)
    #: The shell expands part of it (a variable, a substitution, arithmetic).
    expands: bool = False
    #: It starts with an unquoted glob character: its first letters come from file names.
    globs: bool = False
    #: Bash may run data as code here (arithmetic over names, ``${x@P}``, ``${!x}``).
    evaluates: bool = False
    #: Some of it was quoted (a here-document delimiter then means a literal body).
    quoted: bool = False
    #: A redirection operator or its target (not an argument of the program).
    redirect: bool = False


def parse(line: str) -> list[list[Word]]:
    """The simple commands of ``line`` (pipelines, lists, subshells and groups split apart)."""
    return _Lexer(line).commands()


def scripts_in(text: str, depth: int = 0) -> list[str]:
    """The command substitutions of ``text`` read as the inside of double quotes."""
    word = Word()
    _double(text, 0, word, end=None, depth=depth)
    return word.scripts


def _balanced(text: str, start: int, nesting: int = 0) -> int:
    """Index of the ``)`` closing the ``(`` just before ``start`` (``len(text)`` if none)."""
    if nesting > MAX_DEPTH:
        raise TooDeep(text[:80])
    depth, index = 1, start
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "'":
            close = text.find("'", index + 1)
            index = len(text) if close == -1 else close + 1
            continue
        if char == '"':
            index = _double(text, index + 1, Word(), end='"', depth=nesting + 1)
            continue
        if char == "`":
            index = _backquote_end(text, index + 1) + 1
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return index
        index += 1
    return len(text)


def _brace_end(text: str, start: int) -> int:
    depth, index = 1, start
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char in "'\"":
            close = text.find(char, index + 1)
            index = len(text) if close == -1 else close + 1
            continue
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0:
            return index
        index += 1
    return len(text)


def _backquote_end(text: str, start: int) -> int:
    index = start
    while index < len(text) and text[index] != "`":
        index += 2 if text[index] == "\\" else 1
    return min(index, len(text))


def _dollar(text: str, index: int, word: Word, depth: int = 0) -> int:
    """Reads the expansion at ``text[index] == "$"`` into ``word``; the index after it."""
    if depth > MAX_DEPTH:
        raise TooDeep(text[:80])
    following = text[index + 1 : index + 2]
    if following == "(":
        end = _balanced(text, index + 2, depth + 1)
        inner = text[index + 2 : end]
        if inner.startswith("(") and inner.endswith(")"):
            # Arithmetic: names in it are evaluated, and may hold substitutions of their own.
            word.scripts += scripts_in(inner[1:-1], depth + 1)
            word.evaluates |= bool(re.search(r"[A-Za-z_]", inner))
        else:
            word.scripts.append(inner)
        word.text += text[index : end + 1]
        word.expands = True
        return end + 1
    if following == "[":
        end = text.find("]", index + 2)
        end = len(text) if end == -1 else end
        word.evaluates |= bool(re.search(r"[A-Za-z_]", text[index + 2 : end]))
        word.text += text[index : end + 1]
        word.expands = True
        return end + 1
    if following == "{":
        end = _brace_end(text, index + 2)
        inner = text[index + 2 : end]
        word.scripts += scripts_in(inner, depth + 1)
        word.evaluates |= inner.startswith("!") or "@" in inner or "[" in inner
        word.text += text[index : end + 1]
        word.expands = True
        return end + 1
    match = _NAME.match(text, index + 1)
    if match is not None:
        word.text += text[index : match.end()]
        word.expands = True
        return match.end()
    if following and (following.isdigit() or following in "@*#?$!-"):
        word.text += text[index : index + 2]
        word.expands = True
        return index + 2
    word.text += "$"
    return index + 1


def _double(text: str, index: int, word: Word, *, end: str | None, depth: int = 0) -> int:
    """Reads double-quoted text from ``index`` up to ``end`` (``None``: all of it)."""
    if depth > MAX_DEPTH:
        raise TooDeep(text[:80])
    while index < len(text):
        char = text[index]
        if char == end:
            return index + 1
        plain = _PLAIN_DOUBLE.match(text, index)
        if plain is not None:
            word.text += plain.group()
            index = plain.end()
            continue
        if char == "\\" and index + 1 < len(text):
            following = text[index + 1]
            if following in '$`"\\':
                word.text += following
            elif following != "\n":
                word.text += char + following
            index += 2
        elif char == "$":
            index = _dollar(text, index, word, depth + 1)
        elif char == "`":
            close = _backquote_end(text, index + 1)
            script = text[index + 1 : close].replace("\\`", "`")
            word.scripts.append(script)
            word.text += f"$({script})"
            word.expands = True
            index = close + 1
        else:
            word.text += char
            index += 1
    return index


def _ansi(text: str, index: int, word: Word) -> int:
    """``$'...'`` from just after the opening quote."""
    while index < len(text) and text[index] != "'":
        plain = _PLAIN_ANSI.match(text, index)
        if plain is not None:
            word.text += plain.group()
            index = plain.end()
            continue
        char = text[index]
        if char != "\\" or index + 1 >= len(text):
            word.text += char
            index += 1
            continue
        following = text[index + 1]
        if following in _ANSI:
            word.text += _ANSI[following]
            index += 2
        elif following in "xuU":
            size = {"x": 2, "u": 4, "U": 8}[following]
            digits = re.match(f"[0-9A-Fa-f]{{1,{size}}}", text[index + 2 :])
            if digits is None:
                word.text += "\\" + following
                index += 2
            else:
                word.text += chr(min(int(digits.group(), 16), 0x10FFFF))
                index += 2 + len(digits.group())
        elif following in "01234567":
            digits = re.match(r"[0-7]{1,3}", text[index + 1 :])
            assert digits is not None
            word.text += chr(int(digits.group(), 8))
            index += 1 + len(digits.group())
        else:
            word.text += "\\" + following
            index += 2
    return index + 1


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.index = 0
        self.out: list[list[Word]] = []
        self.command: list[Word] = []
        self.word: Word | None = None
        self.target_next = False
        #: Here-documents whose bodies start at the next newline: the command reading each,
        #: where its delimiter word is in it, and whether leading tabs are stripped.
        self.heredocs: list[tuple[list[Word], int, bool]] = []

    def commands(self) -> list[list[Word]]:
        text = self.text
        while self.index < len(text):
            char = text[self.index]
            if char in " \t\r":
                self.end_word()
                self.index += 1
            elif char == "\\":
                if text[self.index + 1 : self.index + 2] == "\n":
                    self.index += 2
                else:
                    self.current().quoted = True
                    self.current().text += text[self.index + 1 : self.index + 2]
                    self.index += 2
            elif char == "#" and self.word is None:
                end = text.find("\n", self.index)
                self.index = len(text) if end == -1 else end
            elif char == "'":
                close = text.find("'", self.index + 1)
                close = len(text) if close == -1 else close
                word = self.current()
                word.text += text[self.index + 1 : close]
                word.quoted = True
                self.index = close + 1
            elif char == "$" and text[self.index + 1 : self.index + 2] == "'":
                word = self.current()
                word.quoted = True
                self.index = _ansi(text, self.index + 2, word)
            elif char == '"':
                word = self.current()
                word.quoted = True
                self.index = _double(text, self.index + 1, word, end='"')
            elif char == "$":
                self.index = _dollar(text, self.index, self.current())
            elif char == "`":
                close = _backquote_end(text, self.index + 1)
                script = text[self.index + 1 : close].replace("\\`", "`")
                word = self.current()
                word.scripts.append(script)
                word.text += f"$({script})"
                word.expands = True
                self.index = close + 1
            elif char in "<>" and text[self.index + 1 : self.index + 2] == "(":
                end = _balanced(text, self.index + 2)
                word = self.current()
                word.scripts.append(text[self.index + 2 : end])
                word.text += text[self.index : end + 1]
                word.expands = True
                self.index = end + 1
            elif char in "<>" or text.startswith("&>", self.index):
                self.redirection()
            elif char in _OPERATORS:
                self.control()
            else:
                word = self.current()
                if not word.text and not word.quoted and char in "*?[":
                    word.globs = True
                plain = _PLAIN.match(text, self.index)
                run = plain.group() if plain is not None else char
                word.text += run
                self.index += len(run)
        self.end_word()
        self.end_command()
        return self.out

    def current(self) -> Word:
        if self.word is None:
            self.word = Word(redirect=self.target_next)
            self.target_next = False
        return self.word

    def end_word(self) -> None:
        if self.word is not None:
            self.command.append(self.word)
            self.word = None

    def end_command(self) -> None:
        if self.command:
            self.out.append(self.command)
        self.command = []

    def redirection(self) -> None:
        text = self.text
        operator = next(op for op in _REDIRECTIONS if text.startswith(op, self.index))
        word = self.word
        if word is not None and not word.quoted and re.fullmatch(r"\d+|\{\w+\}", word.text):
            word.text += operator  # ``2>``: the descriptor belongs to the operator
            word.redirect = True
            self.end_word()
        else:
            self.end_word()
            self.command.append(Word(operator, redirect=True))
        self.index += len(operator)
        self.target_next = True
        if operator in ("<<", "<<-"):
            self.heredocs.append((self.command, len(self.command), operator == "<<-"))

    def control(self) -> None:
        text = self.text
        self.end_word()
        self.target_next = False
        if text.startswith("((", self.index) and not self.command:
            # ``(( expr ))``: an arithmetic command.
            end = _balanced(text, self.index + 1)
            inner = text[self.index + 2 : max(end - 1, self.index + 2)]
            word = Word("((", scripts=scripts_in(inner), expands=True)
            word.evaluates = bool(re.search(r"[A-Za-z_]", inner))
            self.command.append(word)
            self.index = end + 1
            return
        operator = next(op for op in _CONTROL if text.startswith(op, self.index))
        self.index += len(operator)
        self.end_command()
        if operator == "\n" and self.heredocs:
            self.bodies()

    def bodies(self) -> None:
        """Skips the bodies of the pending here-documents; an unquoted body's substitutions
        run, so they join the command that reads it."""
        text = self.text
        for command, position, strip in self.heredocs:
            delimiter = command[position] if position < len(command) else Word()
            lines: list[str] = []
            while self.index < len(text):
                end = text.find("\n", self.index)
                end = len(text) if end == -1 else end
                line = text[self.index : end]
                self.index = end + 1
                if (line.lstrip("\t") if strip else line) == delimiter.text:
                    break
                lines.append(line)
            if not delimiter.quoted:
                command.append(Word(redirect=True, scripts=scripts_in("\n".join(lines))))
        self.heredocs = []
