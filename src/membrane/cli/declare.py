"""The CLI's declarations: command groups, commands, their arguments and options.

A command is a plain function; its parameters are its arguments and options. A parameter is an
option when it has a default, an argument when it has none, unless its ``Annotated`` metadata or
its default is an ``Option(...)`` or ``Argument(...)`` that says more (flags, help, a metavar).
``bool`` options are flags (``--json``; ``--x/--no-x`` when no flag is named), ``list[...]``
arguments take any number of values and ``list[...]`` options repeat. Nothing is parsed here: the
parser for one command is built from these declarations when that command runs
(``membrane.cli.parsing``), so a command's start pays for its own declarations only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from membrane.errors import ConfigError

__all__ = [
    "REQUIRED",
    "Argument",
    "Command",
    "Exit",
    "Group",
    "Option",
    "UsageError",
    "echo",
]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of a parameter that must be given (``...`` is accepted as well).
REQUIRED: Final = _Required()

CommandFunction = Callable[..., object]


class UsageError(ConfigError):
    """The command line itself is wrong: an unknown command or option, a missing argument, a
    value of the wrong type. The CLI prints the usage line with it and exits 2."""

    code = "usage-error"


class Exit(Exception):
    """Raised by a command to end with ``code`` (the CLI exits with it, printing nothing)."""

    def __init__(self, code: int = 0) -> None:
        super().__init__(code)
        self.code = code


def echo(text: str = "", *, err: bool = False) -> None:
    """Print ``text`` and a newline on stdout (stderr with ``err``), flushed."""
    stream = sys.stderr if err else sys.stdout
    stream.write(f"{text}\n")
    stream.flush()


def _default(value: object) -> object:
    return REQUIRED if value is Ellipsis else value


class Option:
    """An option's declaration: ``Option("--json", help=...)`` in ``Annotated``, or
    ``Option(default, "--name", help=...)`` as the parameter's default.

    Flags are named ``--x`` or ``--x/--no-x`` (a pair for a ``bool``); when none is named, the
    parameter's name with dashes is the flag (``max_turns`` -> ``--max-turns``).
    """

    def __init__(
        self,
        *declared: object,
        help: str = "",
        metavar: str | None = None,
        hidden: bool = False,
    ) -> None:
        default: object = REQUIRED
        names = list(declared)
        if names and not (isinstance(names[0], str) and names[0].startswith("-")):
            default = _default(names.pop(0))
        flags: list[str] = []
        negations: list[str] = []
        for name in names:
            if not isinstance(name, str) or not name.startswith("-"):
                raise TypeError(f"option flags start with '-': {name!r}")
            on, _, off = name.partition("/")
            flags.append(on.strip())
            if off:
                negations.append(off.strip())
        self.default = default
        self.flags = tuple(flags)
        self.negations = tuple(negations)
        self.help = help
        self.metavar = metavar
        self.hidden = hidden


class Argument:
    """An argument's declaration: ``Argument(metavar="AGENT", help=...)`` in ``Annotated``, or
    ``Argument(default, metavar=..., help=...)`` as the parameter's default."""

    def __init__(
        self,
        default: object = REQUIRED,
        *,
        help: str = "",
        metavar: str | None = None,
    ) -> None:
        self.default = _default(default)
        self.help = help
        self.metavar = metavar


@dataclass(frozen=True)
class Command:
    """One command: its words below ``membrane``, the function that runs it, and its help."""

    name: str
    function: CommandFunction
    help: str


@dataclass
class Group:
    """A group of commands (``membrane`` itself, or ``membrane agents``)."""

    name: str = ""
    help: str = ""
    no_args_is_help: bool = False
    commands: dict[str, Command | Group] = field(default_factory=dict)
    #: The command a line that names none of ``commands`` runs (its options follow the group's
    #: word: ``membrane runs --json`` is ``membrane runs list --json``).
    default: str | None = None

    def command(self, name: str | None = None) -> Callable[[CommandFunction], CommandFunction]:
        """Declare the decorated function as the command ``name`` (default: the function's
        name with dashes); its docstring is its help."""

        def declare(function: CommandFunction) -> CommandFunction:
            word = name or function.__name__.replace("_", "-")
            self.commands[word] = Command(word, function, function.__doc__ or "")
            return function

        return declare

    def add_group(self, group: Group, *, name: str | None = None) -> None:
        """Add ``group`` as the command word ``name`` (default: the group's own name)."""
        word = name or group.name
        if not word:
            raise TypeError("a command group needs a name")
        group.name = word
        self.commands[word] = group
