"""Help texts of groups and commands, in one style, for the typer application.

typer reads the command line; this module only writes help. A usage line names the arguments as
written (``AGENT TASK``, ``[RUN_ID]``, ``[PATHS]...``); a flag shows no value; a value shows its
kind (``TEXT``, ``PATH``, ``INTEGER``); every default is written one way, ``(default: X)``.
Docstrings are reflowed: on a terminal each paragraph is wrapped to its width, piped each
paragraph and each option's help is one line, so no sentence is cut by a hard wrap.
``HelpCommand`` and ``HelpGroup`` are typer's command and group with this help (``cls=``).
"""

from __future__ import annotations

import shutil
import sys
import textwrap
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

if TYPE_CHECKING:  # the types typer's own classes are declared with
    from typer import _click as click

__all__ = [
    "HelpCommand",
    "HelpGroup",
    "Param",
    "first_sentence",
    "paragraphs",
    "params_of",
    "usage_line",
]

#: What a value's type is called in help.
_TYPE_NAMES = {str: "TEXT", int: "INTEGER", float: "NUMBER", Path: "PATH"}


@dataclass(frozen=True)
class Param:
    """One parameter of a command, as its help shows it."""

    name: str
    is_option: bool
    is_flag: bool
    many: bool
    default: object
    required: bool
    help: str
    metavar: str
    flags: tuple[str, ...] = ()
    negations: tuple[str, ...] = ()
    hidden: bool = False


def _kind(annotation: object) -> str:
    """``TEXT``, ``INTEGER``, ... for a parameter's type (``list[X]``: X's)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if args and typing.get_origin(annotation) is not typing.Annotated:
        return _kind(args[0])
    return _TYPE_NAMES.get(annotation, "TEXT") if isinstance(annotation, type) else "TEXT"


def params_of(command: click.Command) -> list[Param]:
    """The parameters of ``command`` (typer's), in their order; ``--help`` left out."""
    found: list[Param] = []
    for p in command.params:
        annotation = p.type_descriptor.annotation if hasattr(p, "type_descriptor") else str
        help = getattr(p, "help", None) or ""
        if isinstance(p, TyperArgument):
            metavar = p.metavar or (p.name or "").upper()
            found.append(
                Param(
                    p.name or "", False, False, p.nargs == -1, p.default, p.required, help,
                    metavar,
                )
            )  # fmt: skip
        elif isinstance(p, TyperOption):
            found.append(
                Param(
                    p.name or "", True, p.is_flag, p.multiple, p.default, p.required, help,
                    p.metavar or _kind(annotation), tuple(p.opts), tuple(p.secondary_opts),
                    p.hidden,
                )
            )  # fmt: skip
    return found


class HelpCommand(TyperCommand):
    """A typer command whose usage line and help are this module's."""

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return usage_line([], params_of(self)).split()[1:]

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write(command_help(self, ctx.command_path.split()))


class HelpGroup(TyperGroup):
    """A typer group whose help is this module's: every command with its whole first sentence.
    Given no command, a group shows its help and exits 0 (click's own exits 2)."""

    #: The command a line that names none runs (``defaulting_to``).
    default: str | None = None

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        bare = not args or (args[0].startswith("-") and args[0] not in ("--help", "-h"))
        if self.default is not None and bare:
            args = [self.default, *args]
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            sys.stdout.write(ctx.get_help() + "\n")
            ctx.exit(0)
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write(group_help(self, ctx.command_path.split()))


def defaulting_to(command: str) -> type[HelpGroup]:
    """A ``HelpGroup`` whose line that names no command runs ``command``."""
    return type(f"HelpGroup_{command}", (HelpGroup,), {"default": command})

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write(group_help(self, ctx.command_path.split()))


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


def _body(doc: str, width: int | None) -> list[str]:
    lines: list[str] = []
    for paragraph in paragraphs(doc):
        lines.extend(_wrapped(paragraph, _INDENT, width) if paragraph else [""])
    return lines


def group_help(group: TyperGroup, words: Sequence[str]) -> str:
    """The help of a group: usage, its text, its options and its commands."""
    width = _width()
    lines = [usage_line(words, None), ""]
    if group.help:
        lines += [*_body(group.help, width), ""]
    options = [("--help", _HELP)]
    if len(words) == 1:
        options.insert(0, ("--version", "Print the version and exit."))
    lines += ["Options:", *_table(options, width), "", "Commands:"]
    rows = [(word, first_sentence(node.help or "")) for word, node in group.commands.items()]
    lines += _table(rows, width)
    return "\n".join(lines) + "\n"


def command_help(command: click.Command, words: Sequence[str]) -> str:
    """The help of a command: usage, its docstring, its arguments and its options."""
    width = _width()
    params = params_of(command)
    lines = [usage_line(words, params), ""]
    if command.help:
        lines += [*_body(command.help, width), ""]
    arguments = [(_term(p), _described(p)) for p in params if not p.is_option]
    if arguments:
        lines += ["Arguments:", *_table(arguments, width), ""]
    options = [(_term(p), _described(p)) for p in params if p.is_option and not p.hidden]
    lines += ["Options:", *_table([*options, ("--help", _HELP)], width)]
    return "\n".join(lines) + "\n"
