"""A runtime that dies mid-run: it creates a worktree, leaves work in it, then is SIGKILLed.

Usage: ``python worktree_crash_child.py PROJECT RUN_ID``. Prints the worktree's path, then kills
itself with SIGKILL, so no ``finally``, ``atexit`` or cleanup of any kind runs.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from membrane.runtime.worktree import WorktreeManager


def main() -> None:
    project, run_id = Path(sys.argv[1]), sys.argv[2]
    worktree = WorktreeManager(project).create(run_id)
    (worktree.path / "half-done.txt").write_text("work in progress\n")
    (worktree.path / "README.md").write_text("edited by the killed run\n")
    print(worktree.path, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
