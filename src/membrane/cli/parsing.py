"""The command line read with ``argparse``: the command a line names, its parameters, and help.

``dispatch`` walks the words of the line down the groups to one command, builds an
``argparse`` parser for that command alone from its declarations (``membrane.cli.declare``;
the parser is ``membrane.cli.argparse_line``'s) and calls it. Every mistake in the line is a
``UsageError`` (exit 2); ``--help`` on any group or command prints its help
(``membrane.cli.helptext``). A line that gives the command no parameter at all
(``membrane agents list``) needs no parser: each parameter takes the value ``argparse`` would
give it, its default, and ``argparse`` (with ``gettext`` and ``locale``) is not imported.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from membrane.cli.declare import REQUIRED, Argument, Command, Group, Option, UsageError

__all__ = ["Param", "dispatch", "params_of"]

#: What a value's type is called in help and in error messages.
_TYPE_NAMES = {str: "TEXT", int: "INTEGER", float: "NUMBER", Path: "PATH"}


@dataclass(frozen=True)
class Param:
    """One parameter of a command, as the parser and the help see it."""

    name: str
    is_option: bool
    base: type
    many: bool
    default: object
    help: str
    metavar: str
    flags: tuple[str, ...] = ()
    negations: tuple[str, ...] = ()
    hidden: bool = False

    @property
    def is_flag(self) -> bool:
        return self.is_option and self.base is bool

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def _unwrap(hint: object) -> tuple[object, list[object]]:
    """``Annotated[X, meta...]`` -> ``(X, [meta...])``."""
    metadata = list(getattr(hint, "__metadata__", ()))
    if metadata:
        hint = typing.get_args(hint)[0]
    return hint, metadata


def _base(hint: object) -> tuple[type, bool]:
    """The value type of a hint and whether it takes many values (``list[X] | None``)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        kept = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(kept) != 1:
            raise TypeError(f"a CLI parameter has one type, not {hint!r}")
        hint = kept[0]
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint)
        return _base(item)[0], True
    if not isinstance(hint, type) or (hint not in _TYPE_NAMES and hint is not bool):
        raise TypeError(f"a CLI parameter cannot be of type {hint!r}")
    return hint, False


def params_of(command: Command) -> list[Param]:
    """The parameters of ``command``'s function, in their order."""
    function = command.function
    code = function.__code__
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    positional = code.co_varnames[: code.co_argcount]
    defaults: dict[str, object] = dict(
        zip(positional[len(positional) - len(function.__defaults__ or ()) :],
            function.__defaults__ or (), strict=True)
    )  # fmt: skip
    defaults.update(function.__kwdefaults__ or {})
    hints = typing.get_type_hints(function, include_extras=True)
    found: list[Param] = []
    for name in names:
        hint, metadata = _unwrap(hints[name])
        default = defaults.get(name, REQUIRED)
        declared = next((m for m in metadata if isinstance(m, Option | Argument)), None)
        if isinstance(default, Option | Argument):
            declared, default = default, default.default
        elif declared is not None and declared.default is not REQUIRED:
            default = declared.default
        base, many = _base(hint)
        if declared is None:
            declared = Option() if name in defaults else Argument()
        metavar = declared.metavar or (
            name.upper() if isinstance(declared, Argument) else _TYPE_NAMES.get(base, "")
        )
        if isinstance(declared, Argument):
            found.append(Param(name, False, base, many, default, declared.help, metavar))
            continue
        flags = declared.flags or (f"--{name.replace('_', '-')}",)
        negations = declared.negations
        if base is bool and not declared.flags:
            negations = (f"--no-{name.replace('_', '-')}",)
        found.append(
            Param(
                name, True, base, many, default, declared.help, metavar,
                flags, negations, declared.hidden,
            )
        )  # fmt: skip
    return found


def _defaults(params: list[Param]) -> dict[str, object] | None:
    """The values ``argparse`` gives ``params`` on a line that names none of them; ``None``
    where it must decide: a required parameter (a mistake to report) or a text default that it
    would convert to the parameter's type."""
    values: dict[str, object] = {}
    for p in params:
        if p.required or (isinstance(p.default, str) and p.base in (int, float, Path)):
            return None
        if p.is_flag:
            values[p.name] = p.default is True
        elif p.many and not p.is_option and p.default is None:
            values[p.name] = []  # a positional taking any number of values, given none
        else:
            values[p.name] = p.default
    return values


def _closest(word: str, choices: Sequence[str]) -> str:
    import difflib  # only for a mistake: a command that parses needs none of it

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" Did you mean '{close[0]}'?" if close else ""


def _wants_help(args: Sequence[str]) -> bool:
    for arg in args:
        if arg == "--":
            return False
        if arg in ("--help", "-h"):
            return True
    return False


def _print_help(node: Command | Group, words: list[str], params: list[Param] | None = None) -> None:
    # Help's renderer is imported only when help is asked for.
    from membrane.cli import helptext

    if isinstance(node, Group):
        helptext.print_group(node, words)
    else:
        helptext.print_command(node, params or [], words)


def _mistake(message: str, words: list[str], params: list[Param] | None) -> UsageError:
    from membrane.cli.helptext import usage_line

    return UsageError(message, usage=usage_line(words, params), help=" ".join([*words, "--help"]))


def dispatch(root: Group, args: Sequence[str], *, prog: str = "membrane") -> object:
    """Run the command ``args`` name below ``root``; return what its function returns.

    Raises ``UsageError`` (with ``data["usage"]``, the usage line of the command or group it
    concerns, and ``data["help"]``, the command line that shows its help) for a line that names
    no command or does not fit the command's parameters.
    """
    node: Command | Group = root
    words = [prog]
    rest = list(args)
    while isinstance(node, Group):
        bare = not rest or (rest[0].startswith("-") and rest[0] not in ("--help", "-h"))
        if node.default is not None and bare:
            rest.insert(0, node.default)
        if not rest:
            if node.no_args_is_help:
                _print_help(node, words)
                return None
            raise _mistake("Missing command.", words, None)
        word = rest.pop(0)
        if word in ("--help", "-h"):
            _print_help(node, words)
            return None
        if word.startswith("-"):
            raise _mistake(f"No such option: {word}.", words, None)
        found = node.commands.get(word)
        if found is None:
            hint = _closest(word, sorted(node.commands))
            raise _mistake(f"No such command '{word}'.{hint}", words, None)
        node = found
        words.append(word)
    params = params_of(node)
    if _wants_help(rest):
        _print_help(node, words, params)
        return None
    defaults = None if rest else _defaults(params)
    if defaults is not None:
        return node.function(**defaults)
    from membrane.cli.argparse_line import parser_for  # only a line that gives parameters

    parser = parser_for(params, " ".join(words))
    try:
        parsed = parser.parse_intermixed_args(rest)
    except UsageError as exc:
        options = [f for p in params if p.is_option for f in (*p.flags, *p.negations)]
        unknown = next(
            (a for a in rest if a.startswith("--") and a.split("=")[0] not in options), None
        )
        hint = _closest(unknown.split("=")[0], options) if unknown else ""
        raise _mistake(exc.message + hint, words, params) from None
    return node.function(**vars(parsed))
