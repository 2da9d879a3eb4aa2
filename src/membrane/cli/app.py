"""The typer application and the one place that maps errors to exit codes.

Start-up costs only what the command line needs: ``membrane --version`` imports no library,
the root typer group (``app``) is built on first use, and ``main`` imports only the command
module that the first word of the command line names (``COMMANDS``; every one for
``membrane --help`` or a word that names none), so a command's start pays for its own imports
alone. typer reads the line; ``membrane.cli.helptext`` writes the help.
"""

from __future__ import annotations

import gc
import sys

from membrane._version import __version__

# Not ``typing.TYPE_CHECKING``: ``membrane --version`` imports neither ``typing`` nor a library.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

    import typer
    from rich.console import Console

    from membrane.agents.definition import DefinitionWarning
    from membrane.errors import DefinitionError, MembraneError

    app: typer.Typer
    err_console: Console

#: Command word -> the module under ``membrane.cli`` that defines it.
COMMANDS = {
    "actions": "actions",
    "agents": "agents",
    "console": "console",
    "doctor": "doctor",
    "explain": "explain",
    "init": "init",
    "lineage": "lineage",
    "mcp": "mcp",
    "outbox": "outbox",
    "resume": "runs",
    "run": "run",
    "runs": "runs",
    "schedule": "schedule",
    "serve": "serve",
    "show": "show",
    "skills": "skills",
    "worker": "worker",
    "workflow": "workflow",
}

#: Exit codes: 0 ok, 1 a check found problems (validate), 2 a developer's mistake (a usage
#: error too), 3 a run failed, 130 interrupted, 141 stdout's reader went away.
EXIT_CONFIG = 2
EXIT_RUN = 3
#: Ctrl-C (SIGINT): 128 + 2, as a shell reports a command it interrupted.
EXIT_INTERRUPTED = 130
#: The reader of stdout went away (``membrane ... | head``): 128 + SIGPIPE's 13, silently.
EXIT_PIPE_CLOSED = 141


def __getattr__(name: str) -> object:
    # ``app`` is built when a command module (or a test) first asks; ``err_console``, a Rich
    # console on stderr, only by the commands that print with Rich.
    if name == "app":
        built = group(
            "membrane",
            help="Delegate work to child agents under an exact, explainable capability boundary.",
            no_args_is_help=True,
        )

        # A callback makes ``app`` a group even when only one command module is imported.
        @built.callback()
        def _root() -> None:
            pass

        globals()["app"] = built
        return built
    if name == "err_console":
        from rich.console import Console

        console = Console(stderr=True, soft_wrap=True)
        globals()["err_console"] = console
        return console
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def group(
    name: str, *, help: str, no_args_is_help: bool = False, default: str | None = None
) -> typer.Typer:
    """A typer group of commands (``membrane`` itself, or ``membrane agents``) with the house's
    help (``membrane.cli.helptext``); its commands are declared with ``cls=HelpCommand``.
    ``default``: the command a line that names none runs (its options follow the group's word:
    ``membrane runs --json`` is ``membrane runs list --json``)."""
    import typer

    from membrane.cli.helptext import HelpGroup, defaulting_to

    return typer.Typer(
        name=name,
        help=help,
        cls=HelpGroup if default is None else defaulting_to(default),
        no_args_is_help=no_args_is_help,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )


def echo(text: str = "", *, err: bool = False) -> None:
    """Print ``text`` and a newline on stdout (stderr with ``err``), flushed."""
    stream = sys.stderr if err else sys.stdout
    stream.write(f"{text}\n")
    stream.flush()


def safe_text(text: str, *, stream: TextIO | None = None) -> str:
    """``text`` with what ``stream`` (default: stdout) cannot encode escaped as ``\\uXXXX``.

    Names, paths and messages come from files on disk and may hold lone surrogates or
    characters outside the terminal's encoding; printing must not crash on them.
    """
    encoding = getattr(stream if stream is not None else sys.stdout, "encoding", None) or "utf-8"
    try:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:  # an encoding Python does not know: fall back to ASCII
        return text.encode("ascii", "backslashreplace").decode("ascii")


def warning_json(warning: DefinitionWarning) -> dict[str, object]:
    """The one shape of a warning in every command's JSON: ``{code, message, file, line}``."""
    return {
        "code": warning.code,
        "message": warning.message,
        "file": warning.path,
        "line": warning.line,
    }


def echo_text(text: str, *, err: bool = False) -> None:
    """Print file-derived text verbatim, and a newline: no markup, and nothing the terminal
    cannot encode."""
    stream = sys.stderr if err else sys.stdout
    stream.write(safe_text(text, stream=stream) + "\n")
    stream.flush()


def definition_error_line(error: DefinitionError) -> str:
    """A file that cannot be used, as one line: ``path[:line]: code: message (hint: ...)``."""
    data = error.data
    where = data["path"] if data.get("line") is None else f"{data['path']}:{data['line']}"
    hint = f" (hint: {data['hint']})" if data.get("hint") else ""
    return f"{where}: {error.code}: {error.message}{hint}"


def error_text(exc: MembraneError) -> str:
    """``code: message`` (plus the hint when the message does not already carry it), as plain
    text, safe for stderr."""
    message = str(exc)
    hint = exc.data.get("hint")
    if isinstance(hint, str) and hint and hint not in message:
        message += f" (hint: {hint})"
    return safe_text(f"{exc.code}: {message}", stream=sys.stderr)


def _print_error(exc: MembraneError) -> None:
    text = error_text(exc)
    if sys.stderr.isatty():  # the code in bold red, as a terminal shows it
        code, _, rest = text.partition(":")
        text = f"\x1b[1;31m{code}\x1b[0m:{rest}"
    sys.stderr.write(text + "\n")


def register(word: str | None) -> None:
    """Import the module of command ``word`` (each adds its commands to ``app``), or every
    command module when ``word`` names none."""
    import importlib

    module = COMMANDS.get(word) if word is not None else None
    for name in [module] if module is not None else sorted(set(COMMANDS.values())):
        importlib.import_module(f"membrane.cli.{name}")


def _register_commands(args: list[str]) -> None:
    register(next((arg for arg in args if not arg.startswith("-")), None))


def main(argv: list[str] | None = None) -> int:
    """Entry point. Every ``MembraneError`` becomes ``code: message`` on stderr and an exit code.

    A usage error (an unknown command or option, a missing argument, a bad value) prints the
    usage line with it and exits 2; everything else that escapes is a bug and keeps its
    traceback. With ``--json``, stderr carries the error as one JSON object instead.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        code = _main(args)
        sys.stdout.flush()  # here, not at exit, where a closed pipe prints a traceback-like note
    except BrokenPipeError:  # stdout's reader went away (``membrane ... | head``)
        return _pipe_closed()
    return code


def _main(args: list[str]) -> int:
    if args[:1] == ["--version"]:
        sys.stdout.write(f"membrane {__version__}\n")
        return 0
    # The garbage collector is off while the command's modules are imported: what an import
    # allocates (classes, functions, the modules' tables) lives as long as the process, so a
    # collection then finds nothing to free. In the console script's process (``run``), the
    # objects start-up built are then frozen (``gc.freeze``): no later collection, nor the
    # one at exit, walks them again (together about a tenth of the instructions of
    # ``membrane agents list``). The collector is back on, as it was, before the command runs.
    collecting = gc.isenabled()
    gc.disable()
    try:
        import typer
        import typer.main

        from membrane.cli.usage import USAGE_EXIT, UsageError, usage_error
        from membrane.errors import ConfigError, Interrupted, MembraneError

        _register_commands(args)
        built = globals()["app"] if "app" in globals() else __getattr__("app")
        assert isinstance(built, typer.Typer)
        root = typer.main.get_command(built)
    finally:
        if _FREEZE:
            gc.freeze()
        if collecting:
            gc.enable()
    try:
        try:
            with root.make_context("membrane", args) as ctx:
                root.invoke(ctx)
        except typer.TyperException as exc:
            if exc.exit_code != USAGE_EXIT:
                raise
            raise usage_error(exc, args) from None
        except KeyboardInterrupt:  # Ctrl-C where no run stops itself (run does): exit 130
            raise _interrupted(args) from None
        except BaseExceptionGroup as group:  # one error out of a command's task group
            raise _alone(group, args) from None
    except typer.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:
        if exc.code is None:
            return 0
        return exc.code if isinstance(exc.code, int) else 1
    except MembraneError as exc:
        code = EXIT_CONFIG if isinstance(exc, ConfigError) else EXIT_RUN
        if isinstance(exc, Interrupted):
            code = EXIT_INTERRUPTED
        if "--json" in args:
            import json

            sys.stderr.write(json.dumps({"error": exc.to_dict(), "exit_code": code}) + "\n")
        elif isinstance(exc, UsageError):
            sys.stderr.write(
                f"{exc.data['usage']}\nTry '{exc.data['help']}' for help.\n\n"
                f"Error: {safe_text(exc.message, stream=sys.stderr)}\n"
            )
        else:
            _print_error(exc)
        return code
    return 0


def _interrupted(args: list[str]) -> MembraneError:
    """What Ctrl-C in the command ``args`` is reported as: ``interrupted``."""
    from membrane.errors import Interrupted

    words = [arg for arg in args[:2] if not arg.startswith("-")]
    return Interrupted(f"membrane {' '.join(words)} was stopped by Ctrl-C")


def _alone(group: BaseExceptionGroup[BaseException], args: list[str]) -> BaseException:
    """The one ``MembraneError`` (or Ctrl-C) a task group raised, to report as any other;
    a group of anything else, or of several errors, stays what it is: a bug."""
    from membrane.errors import MembraneError

    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        found = pending.pop()
        if isinstance(found, BaseExceptionGroup):
            pending.extend(found.exceptions)
        else:
            leaves.append(found)
    if len(leaves) == 1 and isinstance(leaves[0], KeyboardInterrupt):
        return _interrupted(args)
    if len(leaves) == 1 and isinstance(leaves[0], MembraneError | BrokenPipeError):
        return leaves[0]
    return group


def _pipe_closed() -> int:
    """stdout's reader closed the pipe: stop without a traceback, and point stdout at the null
    device so the interpreter's last flush at exit cannot fail again."""
    import os

    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no file (a test's capture)
        pass
    finally:
        os.close(null)
    return EXIT_PIPE_CLOSED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


#: Set by ``run``: the process is the command's own, so ``_main`` freezes what start-up built.
#: Not by ``main`` alone, whose caller (a test, a host) may own objects that must stay
#: collectable.
_FREEZE = False


def run() -> None:
    """Console-script entry: exit with ``main``'s code."""
    global _FREEZE
    _FREEZE = True
    sys.exit(main())
