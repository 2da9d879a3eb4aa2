"""The garbage collector at a command's start: no collection while the command's modules are
imported (what they allocate lives as long as the process), and, when ``membrane`` is the
process (the console script), what start-up built is frozen out of later collections. Counted
with ``gc.callbacks`` in a fresh interpreter; ``main`` called in a process of its own leaves
the collector as it found it."""

from __future__ import annotations

import gc
import io
import json
import shutil
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from membrane.cli.app import main

#: Runs ``membrane agents list`` as the console script does and reports, on stderr when the
#: process exits, how many collections started while ``membrane.cli.agents`` (the command's
#: module, with everything it imports) was being imported, how many started in all, and the
#: collector's state.
_PROBE = """
import atexit, gc, json, sys
during_import = []

def watch(phase, info):
    if phase == "start":
        agents = sys.modules.get("membrane.cli.agents")
        during_import.append(getattr(getattr(agents, "__spec__", None), "_initializing", False))

def report():
    print(json.dumps({
        "during_import": sum(during_import),
        "collections": len(during_import),
        "frozen": gc.get_freeze_count(),
        "enabled": gc.isenabled(),
    }), file=sys.stderr)

gc.callbacks.append(watch)
atexit.register(report)
sys.argv = ["membrane", "agents", "list"]
from membrane.cli.app import run
run()
"""


def _probe(cwd: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    assert "scout" in done.stdout
    report: dict[str, object] = json.loads(done.stderr.strip().splitlines()[-1])
    return report


@pytest.mark.costs
def test_no_collection_runs_while_a_command_is_imported(
    tmp_path: Path, isolated_home: Path
) -> None:
    workspace = tmp_path / "workspace"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "workspace", workspace)
    for _ in range(2):  # the first listing parses the files; the second reads the cache
        report = _probe(workspace)
        assert report["during_import"] == 0
        assert report["enabled"] is True  # on again for the command itself
        frozen = report["frozen"]
        assert isinstance(frozen, int) and frozen > 1000  # start-up's objects, out of reach


def test_main_leaves_the_collector_as_it_found_it(tmp_path: Path, isolated_home: Path) -> None:
    frozen = gc.get_freeze_count()
    for enabled in (True, False):
        if not enabled:
            gc.disable()
        try:
            with redirect_stdout(io.StringIO()):
                assert main(["agents", "list", "--project", str(tmp_path)]) == 0
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
    assert gc.get_freeze_count() == frozen  # a process that is not the command's own
