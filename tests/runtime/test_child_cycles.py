"""A finished child leaves nothing that only the garbage collector can free: its per-child
objects hold no reference cycles, so many live children do not make the collector's pauses
grow with them (counted with ``gc.collect()``, never timed).

The count is taken in a process of its own (``scripts/child_cycles.py``): in the test process,
what an earlier test left could become garbage while the collector is off and be counted, such
as the closed loop an asyncio ``waitpid`` thread lets go of when a process that test started
exits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.runtime.conftest import Project

SCRIPT = Path(__file__).parent / "scripts" / "child_cycles.py"
#: A bound for the script, so that a hung run fails; not a timing threshold.
BOUND_SECONDS = 120


@pytest.mark.costs
@pytest.mark.parametrize("background", [False, True])
def test_finished_children_leave_no_reference_cycles(project: Project, background: bool) -> None:
    project.agent("worker", tools="Read")
    argv = [sys.executable, str(SCRIPT), str(project.root), str(project.home), str(int(background))]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=BOUND_SECONDS, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["found"] == 0, report["garbage"]
