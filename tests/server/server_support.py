"""Helpers for the server tests: a real ``membrane serve`` subprocess and a test project."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

#: A bound for a subprocess to start, never a timing threshold of the behaviour under test.
START_BOUND: Final = 60.0

PROJECT_CONFIG = """\
[roles.ops]
allow = ["Read", "Glob", "Grep", "Write", "Bash"]

[rate_limits.Grep]
max_calls = 3
window_seconds = 3600
"""

READER = """\
---
name: reader
description: Reads, and runs shell commands; writes nothing itself.
tools: Read, Bash
---
Read what you are asked to read.
"""


#: The reader's script for a scripted model: one Read of notes.txt, then its answer.
READER_SCRIPT: Final = {
    "agents": {
        "reader": [
            {"tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}]},
            {"text": "reader is done"},
        ]
    }
}


@dataclass
class Running:
    """A ``membrane serve`` a test module shares."""

    socket: Path
    home: Path
    project: Path
    pid: int


def owner(home: Path, **identity: str) -> dict[str, str]:
    """The ``initialize`` identity of the server's owner: the token ``membrane serve`` made in
    ``home`` (what the user's own ``membrane`` commands present)."""
    return {"ownerToken": (home / "owner.token").read_text().strip(), **identity}


def register(socket: Path, home: Path, *projects: Path) -> None:
    """Open ``projects`` as the owner (what the user's own ``membrane`` command does), so that
    callers without the owner's token may reach them."""
    import anyio

    from membrane.server import Client

    async def main() -> None:
        with anyio.fail_after(START_BOUND):
            async with Client.connect(socket) as client:
                await client.request("initialize", {"identity": owner(home)})
                for project in projects:
                    await client.request("projects/add", {"root": str(project)})

    anyio.run(main)


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MEMBRANE_") and key != "PYTEST_CURRENT_TEST"
    }
    env["MEMBRANE_HOME"] = str(home)
    env.update(extra)
    return env


def make_project(root: Path) -> Path:
    (root / ".membrane" / "agents").mkdir(parents=True)
    (root / ".membrane" / "config.toml").write_text(PROJECT_CONFIG)
    (root / ".membrane" / "agents" / "reader.md").write_text(READER)
    (root / "notes.txt").write_text("alpha\nbeta\n")
    return root


def launch(
    socket: Path, home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start ``membrane serve`` without waiting for it."""
    return subprocess.Popen(
        [sys.executable, "-m", "membrane", "serve", "--socket", str(socket), *args],
        env=env or clean_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_listening(proc: subprocess.Popen[str]) -> str:
    """The server's first stderr line once it says it listens; raises if it exits first."""
    assert proc.stderr is not None
    deadline = time.monotonic() + START_BOUND
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], deadline - time.monotonic())
        if not ready:
            break
        line = proc.stderr.readline()
        if not line:
            break
        if "listening on" in line:
            return line
    proc.kill()
    rest = proc.stderr.read()
    raise AssertionError(f"membrane serve did not start (exit {proc.wait()}): {rest}")


def serve(
    socket: Path, home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    proc = launch(socket, home, *args, env=env)
    wait_listening(proc)
    return proc


def stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.terminate()
    try:
        return proc.wait(timeout=START_BOUND)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()
