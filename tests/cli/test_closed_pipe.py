"""A reader that closes stdout early (``membrane ... | head``) ends the command quietly with
exit code 141, whether the write fails inside the command or at its last flush."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _closed_pipe_run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes a byte
    try:
        return subprocess.run(
            [sys.executable, "-m", "membrane", *args],
            cwd=cwd,
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize(
    "args", [["--version"], ["agents", "list"], ["agents", "list", "--json"]], ids=" ".join
)
def test_a_closed_stdout_ends_the_command_with_141_and_no_traceback(
    args: list[str], tmp_path: Path, isolated_home: Path
) -> None:
    agents = tmp_path / ".membrane" / "agents"
    agents.mkdir(parents=True)
    for n in range(200):  # more than a pipe buffer's worth of lines, so a write itself fails
        (agents / f"agent-{n:03}.md").write_text(
            f"---\nname: agent-{n:03}\ndescription: Agent number {n}.\n---\nWork.\n",
            encoding="utf-8",
        )
    done = _closed_pipe_run(args, tmp_path)
    assert done.returncode == 141, done.stderr.decode()
    assert b"Traceback" not in done.stderr and b"Exception ignored" not in done.stderr
