"""The ``argparse`` parser of one command, built from its parameters (``membrane.cli.parsing``)
when the command line gives it any: a line that gives none needs no parser."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from membrane.cli.declare import UsageError

if TYPE_CHECKING:
    from membrane.cli.parsing import Param

__all__ = ["convert", "parser_for"]


def convert(base: type) -> object:
    """What turns a value's text into ``base`` (``None``: it stays text)."""
    if base is int:

        def integer(text: str) -> int:
            return int(text)

        return integer
    if base is float:

        def number(text: str) -> float:
            return float(text)

        return number
    if base is Path:
        return Path
    return None


def parser_for(params: list[Param], prog: str) -> argparse.ArgumentParser:
    """The parser of one command's ``params``; its errors are ``UsageError``."""

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            raise UsageError(message[:1].upper() + message[1:] + ".")

    def formatter(prog: str) -> argparse.HelpFormatter:
        # argparse never prints here (help and usage lines are ``membrane.cli.helptext``'s), so
        # a fixed width spares its terminal size lookup, and the import of ``shutil`` with it.
        return argparse.HelpFormatter(prog, width=80)

    # ``usage`` given: ``parse_intermixed_args`` would otherwise format one it never shows.
    parser = Parser(
        prog=prog, usage=prog, add_help=False, allow_abbrev=False, formatter_class=formatter
    )
    for p in params:
        shown = argparse.SUPPRESS if p.hidden else p.help
        if not p.is_option:
            nargs = ("+" if p.required else "*") if p.many else (None if p.required else "?")
            parser.add_argument(
                p.name, metavar=p.metavar, nargs=nargs, type=convert(p.base),  # type: ignore[arg-type]
                default=None if p.required else p.default, help=shown,
            )  # fmt: skip
        elif p.is_flag:
            parser.add_argument(*p.flags, dest=p.name, action="store_true", help=shown)
            if p.negations:
                parser.add_argument(*p.negations, dest=p.name, action="store_false")
            parser.set_defaults(**{p.name: p.default is True})
        else:
            parser.add_argument(
                *p.flags, dest=p.name, metavar=p.metavar, type=convert(p.base),  # type: ignore[arg-type]
                action="append" if p.many else "store", required=p.required,
                default=None if p.required else p.default, help=shown,
            )  # fmt: skip
    return parser
