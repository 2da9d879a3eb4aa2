"""A command line typer refuses, as Membrane's error: ``usage-error`` (exit 2).

typer reads the line; what it refuses (an unknown command or option, a missing argument, a
value of the wrong type: a ``typer.TyperException`` with exit code 2) becomes a ``UsageError``
carrying the usage line of the command it concerns and the command line that shows that
command's help, so the CLI prints it as it prints every error (one JSON object on stderr with
``--json``). Only typer's public names are used; the details of its exceptions are read as
attributes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from typer import TyperException

from membrane.errors import ConfigError

__all__ = ["USAGE_EXIT", "UsageError", "usage_error"]

#: The exit code typer gives a usage error.
USAGE_EXIT: Final = 2


class UsageError(ConfigError):
    """The command line itself is wrong: an unknown command or option, a missing argument, a
    value of the wrong type. The CLI prints the usage line with it and exits 2."""

    code = "usage-error"


def usage_error(exc: TyperException, args: Sequence[str]) -> UsageError:
    """``exc``, raised reading the command line ``args``, as a ``UsageError``: its message,
    with the closest option when one is close (``Did you mean '--json'?``), a missing argument
    named as the usage line names it, and a value of the wrong type quoted."""
    format_message = getattr(exc, "format_message", None)
    message = str(format_message() if callable(format_message) else exc)
    option = getattr(exc, "option_name", None)
    param = getattr(exc, "param", None)
    if isinstance(option, str) and message.startswith("No such option"):
        message = f"No such option: {option}."
        possibilities = sorted(getattr(exc, "possibilities", None) or ())
        if possibilities:
            message += f" Did you mean '{possibilities[0]}'?"
    elif message.startswith("Missing argument") and param is not None:
        name = getattr(param, "metavar", None) or str(getattr(param, "name", "")).upper()
        message = f"Missing argument '{name}'."
    elif message.startswith("Invalid value for") and param is not None:
        flags = tuple(getattr(param, "opts", ()))
        value = _given(args, flags)
        if value is not None:
            annotation = getattr(getattr(param, "type_descriptor", None), "annotation", str)
            message = f"Invalid value for '{flags[0]}': {value!r} is not {_kind(annotation)}."
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return UsageError(message, usage="Usage: membrane [OPTIONS] COMMAND [ARGS]...",
                          help="membrane --help")  # fmt: skip
    return UsageError(message, usage=ctx.get_usage(), help=f"{ctx.command_path} --help")


def _given(args: Sequence[str], flags: Sequence[str]) -> str | None:
    """The last value ``args`` give one of ``flags`` (``--width 9`` or ``--width=9``)."""
    found = None
    for i, arg in enumerate(args):
        if arg == "--":
            break
        name, equals, value = arg.partition("=")
        if name in flags:
            found = value if equals else (args[i + 1] if i + 1 < len(args) else None)
    return found


def _kind(annotation: object) -> str:
    if annotation is int or "int" in str(annotation):
        return "an integer"
    if annotation is float or "float" in str(annotation):
        return "a number"
    return "a valid value"
