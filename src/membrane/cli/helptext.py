"""Help texts of groups and commands, in one style.

A usage line names the arguments as written (``AGENT TASK``, ``[RUN_ID]``, ``[PATHS]...``); a
flag shows no value; a value shows its kind (``TEXT``, ``PATH``, ``INTEGER``); every default is
written one way, ``(default: X)``. Docstrings are reflowed: on a terminal each paragraph is
wrapped to its width, piped each paragraph and each option's help is one line, so no sentence is
cut by a hard wrap.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from membrane.cli.declare import Command, Group
from membrane.cli.parsing import Param

__all__ = ["first_sentence", "paragraphs", "print_command", "print_group", "usage_line"]

_HELP = "Show this message and exit."
_INDENT = "  "


def paragraphs(doc: str) -> list[str]:
    """A docstring's paragraphs, each one line; list items (``- x``) stay lines of their own."""
    found: list[str] = []
    for block in textwrap.dedent(_dedent_tail(doc)).strip().split("\n\n"):
        lines: list[str] = []
        for raw in block.splitlines():
            line = raw.strip()
            if lines and not line.startswith(("- ", "* ")):
                lines[-1] += " " + line
            else:
                lines.append(line)
        found.extend(lines)
        found.append("")
    return found[:-1] if found else []


def _dedent_tail(doc: str) -> str:
    # A docstring's first line has no indent and the rest do: dedent the rest alone.
    head, _, tail = doc.partition("\n")
    return head.strip() + "\n" + textwrap.dedent(tail)


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring, whole: what a command listing shows."""
    text = next((p for p in paragraphs(doc) if p), "")
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def _width() -> int | None:
    """The terminal's width, or ``None`` when the output is piped (no wrapping at all)."""
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def _wrapped(text: str, indent: str, width: int | None, hang: str | None = None) -> list[str]:
    if width is None or not text:
        return [indent + text]
    return textwrap.wrap(
        text, width=max(width, 40), initial_indent=indent,
        subsequent_indent=indent if hang is None else hang,
        break_long_words=False, break_on_hyphens=False,
    ) or [indent]  # fmt: skip


def usage_line(words: Sequence[str], params: Sequence[Param] | None) -> str:
    """``Usage: membrane run [OPTIONS] AGENT TASK``; ``params=None`` for a group."""
    if params is None:
        return f"Usage: {' '.join(words)} [OPTIONS] COMMAND [ARGS]..."
    shown = []
    for p in params:
        if p.is_option:
            continue
        name = p.metavar if p.required else f"[{p.metavar}]"
        shown.append(name + ("..." if p.many else ""))
    return " ".join(["Usage:", *words, "[OPTIONS]", *shown])


def _default_of(p: Param) -> str | None:
    if p.required or p.default is None or p.default is False or p.default in ((), []):
        return None
    if p.is_flag:
        return p.flags[0]
    if isinstance(p.default, Path):
        return "the current directory" if p.default == Path(".") else str(p.default)
    return str(p.default)


def _described(p: Param) -> str:
    text = " ".join(p.help.split())
    default = _default_of(p)
    if default is not None and "(default:" not in text:
        text = f"{text} (default: {default})".strip()
    if p.required and p.is_option:
        text = f"{text} (required)".strip()
    return text


def _term(p: Param) -> str:
    if not p.is_option:
        return p.metavar
    names = " / ".join((", ".join(p.flags), *([", ".join(p.negations)] if p.negations else [])))
    if p.is_flag:
        return names
    return f"{names} {p.metavar}" + (" (repeatable)" if p.many else "")


def _table(rows: list[tuple[str, str]], width: int | None) -> list[str]:
    column = max((len(term) for term, _ in rows), default=0) + 2
    out: list[str] = []
    for term, text in rows:
        head = f"{_INDENT}{term.ljust(column)}"
        if width is None or len(head) > width // 2:
            out.append(f"{head}{text}".rstrip())
            continue
        wrapped = _wrapped(text, head, width, " " * len(head))
        out.extend(line.rstrip() for line in wrapped)
    return out


def _print(lines: list[str]) -> None:
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def _body(doc: str, width: int | None) -> list[str]:
    lines: list[str] = []
    for paragraph in paragraphs(doc):
        lines.extend(_wrapped(paragraph, _INDENT, width) if paragraph else [""])
    return lines


def print_group(group: Group, words: Sequence[str]) -> None:
    """The help of a group: usage, its text, its options and its commands."""
    width = _width()
    lines = [usage_line(words, None), ""]
    if group.help:
        lines += [*_body(group.help, width), ""]
    options = [("--help", _HELP)]
    if len(words) == 1:
        options.insert(0, ("--version", "Print the version and exit."))
    lines += ["Options:", *_table(options, width), "", "Commands:"]
    rows = [(word, first_sentence(node.help)) for word, node in group.commands.items()]
    lines += _table(rows, width)
    _print(lines)


def print_command(command: Command, params: Sequence[Param], words: Sequence[str]) -> None:
    """The help of a command: usage, its docstring, its arguments and its options."""
    width = _width()
    lines = [usage_line(words, params), ""]
    if command.help:
        lines += [*_body(command.help, width), ""]
    arguments = [(_term(p), _described(p)) for p in params if not p.is_option]
    if arguments:
        lines += ["Arguments:", *_table(arguments, width), ""]
    options = [(_term(p), _described(p)) for p in params if p.is_option and not p.hidden]
    lines += ["Options:", *_table([*options, ("--help", _HELP)], width)]
    _print(lines)
