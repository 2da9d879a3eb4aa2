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

__all__ = ["error_code", "json_lines", "state_of", "wait_gone", "write"]


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
