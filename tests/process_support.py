"""What the crash tests share: a script run in a fresh Python, killed once it has spoken."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["cli_imports", "first_line_then_kill", "probe_json"]


def first_line_then_kill(script: Path, *args: object, what: str = "the script") -> Any:
    """Run ``script`` with ``args``, read the JSON line it prints first, then kill it with
    SIGKILL (a crash, with nothing cleaned up) and check that the kill is what ended it."""
    process = subprocess.Popen(
        [sys.executable, str(script), *(str(arg) for arg in args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"{what} printed nothing: {process.stderr.read()}")
        found = json.loads(line)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    return found


def probe_json(code: str, *args: object) -> Any:
    """Run ``code`` in a fresh Python (``python -c``) with ``args``; the JSON it prints."""
    done = subprocess.run(
        [sys.executable, "-c", code, *(str(arg) for arg in args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


#: Runs ``membrane`` with the command line it is given and reports, on stderr, the exit code and
#: every module the command imported.
CLI_PROBE = """
import json, sys
from membrane.cli.app import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def cli_imports(*args: str, cwd: Path | None = None) -> tuple[int, set[str], str]:
    """Run ``membrane args`` in a fresh Python: its exit code, the modules it imported (counted
    when it ends) and what it printed."""
    done = subprocess.run(
        [sys.executable, "-c", CLI_PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        check=False,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], set(report["modules"]), done.stdout
