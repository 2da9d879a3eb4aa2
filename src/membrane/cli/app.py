"""The typer application and the one place that maps errors to exit codes."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

import membrane
from membrane.errors import ConfigError, MembraneError

app = typer.Typer(
    name="membrane",
    help="Delegate work to child agents under an exact, explainable capability boundary.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True, soft_wrap=True)

#: Exit codes: 0 ok, 1 a check found problems (validate), 2 a developer's mistake, 3 a run failed.
EXIT_CONFIG = 2
EXIT_RUN = 3


def _version(value: bool) -> None:
    if value:
        typer.echo(f"membrane {membrane.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Membrane."""


def _register_commands() -> None:
    # Each command module adds itself to ``app`` on import.
    from membrane.cli import commands  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    """Entry point. Every ``MembraneError`` becomes ``code: message`` on stderr and an exit code.

    Usage errors are click's own (exit 2 with its message); everything else that escapes is a bug
    and keeps its traceback.
    """
    _register_commands()
    try:
        app(args=argv, prog_name="membrane", standalone_mode=True)
    except MembraneError as exc:
        err_console.print(f"[bold red]{exc.code}[/]: {exc}", highlight=False, markup=True)
        return EXIT_CONFIG if isinstance(exc, ConfigError) else EXIT_RUN
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
