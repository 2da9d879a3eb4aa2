"""Helpers for the console's tests: a project, a real ``membrane serve`` subprocess, and the
console's application on it (Starlette's test client, or uvicorn for a browser)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

#: A bound for a subprocess to start or a run to end, never a timing threshold under test.
BOUND: Final = 60.0

CONFIG = """\
console_role = "ops"

[roles.ops]
allow = ["Read", "Glob", "Grep", "Write", "Bash"]

[roles.viewer]
allow = ["Read", "Glob", "Grep"]
"""

HELPER = """\
---
# The helper reads; it never writes.
name: helper
description: Helps with questions about the notes.
tools: Read, Grep  # read-only on purpose
---
Answer from the notes.
"""

SHADOWED = """\
---
name: helper
description: The workspace's helper, shadowed by the project's.
---
Unused.
"""

ODD = """\
---
name: odd
description: Carries a key Membrane does not know.
colour: red
---
Odd.
"""

MAKER = """\
---
name: maker
description: Makes files.
tools: Write, Bash(echo:*)
---
Make them.
"""

READER = """\
---
name: reader
description: Reads the notes.
tools: Read
---
Read what you are asked to read.
"""

LEAD = """\
---
name: lead
description: Plans under the planning gate.
workflow: planning
---
Plan the work.
"""

INTAKE = {
    "summary": "a one-line fix",
    "touches_ui_surface": False,
    "low_risk": True,
    "single_worker": True,
}

SCRIPT = {
    "agents": {
        # The intake offers a light plan; with no callback the run waits in light_offer.
        "lead": [
            {"tool_calls": [{"name": "recordCodebaseIntake", "arguments": INTAKE}]},
            {"text": "the light plan is offered: waiting for the user"},
        ],
        "maker": [
            {"tool_calls": [{"name": "Bash", "arguments": {"command": "touch out/made.txt"}}]},
            {"text": "made"},
        ],
        "reader": [
            {"tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}]},
            # Out of scope (the reader's tools are Read alone): vetoed at call time.
            {"tool_calls": [{"name": "Bash", "arguments": {"command": "rm notes.txt"}}]},
            {"text": "reader is done"},
        ],
    }
}


@dataclass
class Served:
    """A project and the ``membrane serve`` its console connects to."""

    project: Path
    home: Path
    socket: Path
    script: Path

    @property
    def model(self) -> str:
        return f"scripted:{self.script}"


def make_project(root: Path) -> Path:
    agents = root / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (root / ".membrane" / "config.toml").write_text(CONFIG, encoding="utf-8")
    agents_files = (
        ("helper", HELPER), ("odd", ODD), ("maker", MAKER), ("reader", READER), ("lead", LEAD)
    )  # fmt: skip
    for name, text in agents_files:
        (agents / f"{name}.md").write_text(text, encoding="utf-8")
    workspace_agents = root / ".agents" / "agents"
    workspace_agents.mkdir(parents=True)
    (workspace_agents / "helper.md").write_text(SHADOWED, encoding="utf-8")
    (root / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    # Under Landlock nothing new can be made at the checkout's top level: the maker writes here.
    (root / "out").mkdir()
    return root


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMBRANE_")}
    env.pop("PYTEST_CURRENT_TEST", None)
    env["MEMBRANE_HOME"] = str(home)
    return env


@contextmanager
def serving(base: Path) -> Iterator[Served]:
    """A project under ``base`` and a real ``membrane serve`` for it, with ``MEMBRANE_HOME``
    and ``MEMBRANE_SOCKET`` set in this process as the user's shell would have them."""
    home = base / "home"
    home.mkdir()
    project = make_project(base / "project")
    script = base / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    socket = base / "sock" / "m.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "membrane", "serve", "--socket", str(socket)],
        env=_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_listening(proc)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("MEMBRANE_HOME", str(home))
            patch.setenv("MEMBRANE_SOCKET", str(socket))
            patch.setenv("CLAUDE_CONFIG_DIR", str(base / "claude-home"))
            for var in ("MEMBRANE_TOKEN", "MEMBRANE_ROLE", "MEMBRANE_HEADLESS"):
                patch.delenv(var, raising=False)
            yield Served(project=project, home=home, socket=socket, script=script)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=BOUND)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_listening(proc: subprocess.Popen[str]) -> None:
    assert proc.stderr is not None
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], deadline - time.monotonic())
        line = proc.stderr.readline() if ready else ""
        if not line:
            break
        if "listening on" in line:
            return
    proc.kill()
    raise AssertionError(f"membrane serve did not start: {proc.stderr.read()}")
