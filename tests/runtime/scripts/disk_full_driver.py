"""Runs ``worker`` to its end on a real SQLite file whose disk fills as the run ends.

Usage: disk_full_driver.py STATE_DB PROJECT HOME

The worker's model answers once; before it does, this process's file size limit
(``RLIMIT_FSIZE``, with ``SIGXFSZ`` ignored) is set to the largest of the store's files, so no
write may grow them any more: the end of the run cannot be written, as on a full disk. Prints
one JSON line: what ``runtime.run()`` returned (``status``, ``error``) or raised (``raised``),
and the run's status in ``runtime.runs()``.
"""

from __future__ import annotations

import json
import resource
import signal
import sys
from pathlib import Path

import anyio
from script_runtime import script_runtime

from membrane.errors import MembraneError
from membrane.models.base import ModelRequest, ModelResponse
from membrane.runtime import SubagentStartRequest
from membrane.store import SQLiteStore


def fill_disk(db: str) -> None:
    files = [p for p in Path(db).parent.glob(Path(db).name + "*") if p.is_file()]
    limit = max(p.stat().st_size for p in files)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


async def main(db: str, project: str, home: str) -> None:
    async def answer(request: ModelRequest) -> ModelResponse:
        fill_disk(db)
        return ModelResponse(text="the job is done")

    store = SQLiteStore(db)
    runtime = script_runtime(store, project, home, answer)
    found: dict[str, object] = {}
    async with runtime:
        with anyio.fail_after(60):
            try:
                result = await runtime.run(SubagentStartRequest("worker", "do the job"))
            except MembraneError as exc:
                found["raised"] = exc.code
            else:
                found["status"] = result.status
                found["error"] = result.error
        found["listed"] = [info.status for info in runtime.runs()]
    print(json.dumps(found), flush=True)


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
