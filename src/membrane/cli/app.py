"""The typer application and the one place that maps errors to exit codes.

Start-up costs only what the command line needs: ``membrane --version`` imports no library,
the typer application (``app``) is built on first use, and ``main`` imports only the command
module that the first word of the command line names (``membrane.cli.commands``).
"""

from __future__ import annotations

import sys

from membrane._version import __version__

# Not ``typing.TYPE_CHECKING``: ``membrane --version`` imports neither ``typing`` nor a library.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

    import typer
    from rich.console import Console
    from rich.text import Text

    from membrane.agents.definition import DefinitionWarning
    from membrane.errors import MembraneError

    app: typer.Typer
    err_console: Console

#: Exit codes: 0 ok, 1 a check found problems (validate), 2 a developer's mistake, 3 a run failed.
EXIT_CONFIG = 2
EXIT_RUN = 3


def __getattr__(name: str) -> object:
    # ``app`` and ``err_console`` are built when a command module (or a test) first asks.
    if name in ("app", "err_console"):
        _build()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _app() -> typer.Typer:
    _build()
    built: typer.Typer = globals()["app"]
    return built


def _err_console() -> Console:
    _build()
    built: Console = globals()["err_console"]
    return built


def _build() -> None:
    if "app" in globals():
        return
    import typer
    from rich.console import Console

    built = typer.Typer(
        name="membrane",
        help="Delegate work to child agents under an exact, explainable capability boundary.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # Plain help: usage lines name the arguments (AGENT TASK), flags take no value, and
        # brackets in help texts ([models.NAME]) are text, never markup.
        rich_markup_mode=None,
    )

    def _version(value: bool) -> None:
        if value:
            typer.echo(f"membrane {__version__}")
            raise typer.Exit()

    @built.callback()
    def _root(
        version: bool = typer.Option(
            False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ) -> None:
        """Membrane."""

    globals().update(app=built, err_console=Console(stderr=True, soft_wrap=True))


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


#: Piped output has no width to fit: a table is as wide as its longest cell.
_PIPED_WIDTH = 4096


def table_console() -> Console:
    """A console for tables: the terminal's width on a terminal; piped, wide enough that no
    cell (a path, a name) is broken across lines."""
    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    return Console(width=_PIPED_WIDTH)


def warning_json(warning: DefinitionWarning) -> dict[str, object]:
    """The one shape of a warning in every command's JSON: ``{code, message, file, line}``."""
    return {
        "code": warning.code,
        "message": warning.message,
        "file": warning.path,
        "line": warning.line,
    }


def error_text(exc: MembraneError) -> Text:
    """``code: message`` (plus the hint when the message does not already carry it), as plain
    text: nothing in a message is read as Rich markup."""
    from rich.text import Text

    message = str(exc)
    hint = exc.data.get("hint")
    if isinstance(hint, str) and hint and hint not in message:
        message += f" (hint: {hint})"
    return Text.assemble((exc.code, "bold red"), ": ", safe_text(message, stream=sys.stderr))


def _register_commands(args: list[str]) -> None:
    # Each command module adds itself to ``app`` on import; only the one named is imported.
    from membrane.cli.commands import register

    register(next((arg for arg in args if not arg.startswith("-")), None))


def main(argv: list[str] | None = None) -> int:
    """Entry point. Every ``MembraneError`` becomes ``code: message`` on stderr and an exit code.

    Usage errors are click's own (exit 2 with its message); everything else that escapes is a bug
    and keeps its traceback.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        sys.stdout.write(f"membrane {__version__}\n")
        return 0
    from membrane.errors import ConfigError, MembraneError

    _register_commands(args)
    try:
        _app()(args=args, prog_name="membrane", standalone_mode=True)
    except MembraneError as exc:
        code = EXIT_CONFIG if isinstance(exc, ConfigError) else EXIT_RUN
        if "--json" in args:
            # With --json, stderr carries the error as one JSON object too.
            import json

            sys.stderr.write(json.dumps({"error": exc.to_dict(), "exit_code": code}) + "\n")
        else:
            _err_console().print(error_text(exc), highlight=False)
        return code
    except SystemExit as exc:
        if exc.code is None:
            return 0
        return exc.code if isinstance(exc.code, int) else 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


def run() -> None:
    """Console-script entry: exit with ``main``'s code."""
    sys.exit(main())
