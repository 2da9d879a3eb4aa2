"""The command modules; each registers itself on ``app`` when imported.

``register(word)`` imports only the module of the command ``word`` (the first word of the
command line), so a command's start pays for its own imports alone; an unknown word, or none
(``membrane --help``), imports them all so that help and errors list every command.
"""

from __future__ import annotations

import importlib
from typing import Final

__all__ = ["COMMANDS", "register"]

#: Command word -> the module under ``membrane.cli`` that defines it.
COMMANDS: Final = {
    "actions": "actions",
    "agents": "agents",
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
    "workflow": "workflow",
}


def register(word: str | None) -> None:
    """Import the module of command ``word``, or every command module."""
    module = COMMANDS.get(word) if word is not None else None
    for name in [module] if module is not None else sorted(set(COMMANDS.values())):
        importlib.import_module(f"membrane.cli.{name}")
