"""Starts ``worker`` with the request id ``spawn-1`` on a real SQLite file under ``full``.

Usage: stalled_flush_driver.py STATE_DB PROJECT HOME MODE

* ``stall``: the store's flusher syncs normally until the start's publication has committed
  (its receipt is completed in the file); that sync prints ``stalled`` and blocks for ever, so
  ``start()`` never returns. The test kills the process there.
* ``replay``: the same start again on the same file; prints ``{"run_id": ...}``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
from collections.abc import Callable

import anyio
from crash_driver import runtime_on

from membrane.runtime import SubagentStartRequest
from membrane.store import SQLiteStore


def stalling(db: str) -> Callable[[int], None]:
    def fsync(fd: int) -> None:
        conn = sqlite3.connect(db)
        try:
            row = conn.execute(
                "SELECT status FROM receipts WHERE request_id = 'spawn-1'"
            ).fetchone()
        finally:
            conn.close()
        if row is not None and row[0] == "completed":
            print("stalled", flush=True)
            threading.Event().wait()
        os.fsync(fd)

    return fsync


async def main(db: str, project: str, home: str, mode: str) -> None:
    store = SQLiteStore(db, fsync=stalling(db)) if mode == "stall" else SQLiteStore(db)
    runtime = runtime_on(store, project, home)
    async with runtime:
        with anyio.fail_after(60):
            info = await runtime.start(
                SubagentStartRequest("worker", "do the job", request_id="spawn-1", background=True)
            )
        print(json.dumps({"run_id": info.run_id}), flush=True)


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
