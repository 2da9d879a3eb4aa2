"""What the ``membrane run`` and ``membrane runs`` tests share: files, the project's state
file, and reading what a command printed."""

from __future__ import annotations

import json
import os
import select
from pathlib import Path
from typing import Any

from membrane.config.load import membrane_home
from membrane.store.location import locate_state

__all__ = ["cli_commands", "error_code", "json_lines", "state_of", "wait_gone", "write"]


def write(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (its folders made); the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def state_of(project: Path) -> Path:
    """Where the project's state lives: under the test's ``MEMBRANE_HOME``."""
    return locate_state(project, home=membrane_home()).path


def json_lines(out: str) -> list[dict[str, Any]]:
    """Every line of ``out`` as a JSON object."""
    return [json.loads(line) for line in out.splitlines()]


def error_code(err: str) -> str:
    """The stable code that starts ``code: message`` on stderr."""
    return err.strip().split(":", 1)[0]


def wait_gone(pid: int, *, bound: float = 120.0) -> None:
    """Wait until process ``pid`` (a detached run) has ended; ``bound`` only fails a hung run,
    no duration is asserted."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        ready, _, _ = select.select([handle], [], [], bound)
        assert ready, f"process {pid} did not end"
    finally:
        os.close(handle)


def cli_commands() -> tuple[dict[str, Any], list[str]]:
    """Every command of the CLI as typer builds it (``"agents list"`` -> its click command),
    and the words of every group (``""`` for ``membrane`` itself)."""
    import typer.main
    from typer.core import TyperGroup

    from membrane.cli.app import app, register

    register(None)
    commands: dict[str, Any] = {}
    groups: list[str] = []

    def walk(node: Any, words: tuple[str, ...]) -> None:
        if isinstance(node, TyperGroup):
            groups.append(" ".join(words))
            for word, child in node.commands.items():
                walk(child, (*words, word))
        else:
            commands[" ".join(words)] = node

    walk(typer.main.get_command(app), ())
    return commands, groups
