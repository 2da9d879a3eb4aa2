"""``WireLog``: the requests the SDK adapters sent and what came back, one JSON line each.

``membrane run --log-requests`` (or ``log_requests = true`` in the settings) gives every model a
log in the ``requests`` folder beside the run's state file (``$MEMBRANE_HOME/projects/<id>/``,
never the checkout): one file per run, ``<run_id>.jsonl``, a line per request. A line holds
the exact keyword arguments the adapter gave its SDK (``messages``, ``tools``, ``tool_choice``,
...), which model, provider and endpoint answered, how long it took, and the response as
Membrane read it, or the error with its code. Headers are not written, and every line is
redacted (``membrane.models.retry.redact``): the key itself and anything shaped like a key or a
bearer token is ``[redacted]``. The folder is private to its user (0700, files 0600).

``membrane show RUN_ID --requests`` prints a run's log (``read_requests``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from membrane.errors import InvalidRequest
from membrane.models.retry import redact

__all__ = ["REQUESTS_FOLDER", "WireLog", "read_requests"]

#: The folder, beside the state file, that holds the logs.
REQUESTS_FOLDER: Final = "requests"
_RUN_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def _file(folder: Path, run_id: str) -> Path:
    if not _RUN_ID.fullmatch(run_id) or ".." in run_id:
        raise InvalidRequest(f"{run_id!r} is not a run id", field="run_id")
    return folder / f"{run_id}.jsonl"


class WireLog:
    """Appends one redacted JSON line per model request to ``folder/<run_id>.jsonl``."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def __repr__(self) -> str:
        return f"WireLog({str(self.folder)!r})"

    def write(self, run_id: str, entry: dict[str, Any], *, secrets: Iterable[str | None]) -> None:
        """Append ``entry`` (JSON data) to ``run_id``'s log, every secret removed first."""
        path = _file(self.folder, run_id)
        line = redact(json.dumps(entry, ensure_ascii=False, default=str), secrets) + "\n"
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(descriptor, "a", encoding="utf-8") as out:
            out.write(line)


def read_requests(folder: Path, run_id: str) -> list[dict[str, Any]] | None:
    """The logged requests of ``run_id`` in order, or ``None`` when none were logged."""
    path = _file(folder, run_id)
    if not path.exists():
        return None
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]
