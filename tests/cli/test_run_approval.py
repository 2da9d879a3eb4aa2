"""``ask`` rules in ``membrane run``: put to the user on a real pseudo-terminal, refused with
``approval-unavailable`` when no terminal can answer."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_run_interrupt import _read_until

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="needs a Linux pseudo-terminal")

AGENT = "---\nname: maker\ndescription: Makes files.\ntools: Write, Bash(echo:*)\n---\nMake them.\n"
SCRIPT = """\
agents:
  maker:
    - tool_calls:
        - {name: Bash, arguments: {command: "touch out/approved.txt"}}
        - {name: Bash, arguments: {command: "touch out/refused.txt"}}
    - text: made
"""


def _plain(data: bytes) -> bytes:
    """Terminal output without its colour and cursor sequences."""
    return re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", data)


def _project(tmp_path: Path) -> tuple[Path, list[str]]:
    project = tmp_path / "project"
    (project / ".membrane" / "agents").mkdir(parents=True)
    (project / ".membrane" / "agents" / "maker.md").write_text(AGENT, encoding="utf-8")
    # The files are made in a folder of the checkout: under Landlock (the sandbox where no
    # bwrap is), a command cannot create entries at the checkout's top level.
    (project / "out").mkdir()
    script = tmp_path / "script.yaml"
    script.write_text(SCRIPT, encoding="utf-8")
    argv = [sys.executable, "-m", "membrane", "run", "maker", "make", "--project", str(project)]
    return project, [*argv, "--model", f"scripted:{script}"]


def test_an_ask_is_put_to_the_user_on_a_terminal(tmp_path: Path, isolated_home: Path) -> None:
    project, argv = _project(tmp_path)
    env = {**os.environ, "COLUMNS": "200", "TERM": "xterm"}
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child process
        os.execve(sys.executable, argv, env)
    try:
        first = _plain(_read_until(fd, b"[y/N]"))
        assert b"maker asks to run Bash: touch out/approved.txt" in first
        assert b"needs approval" in first
        os.write(fd, b"y\n")
        second = first.partition(b"[y/N]")[2]
        if b"[y/N]" not in second:
            second += _plain(_read_until(fd, b"[y/N]"))
        assert b"maker asks to run Bash: touch out/refused.txt" in second
        os.write(fd, b"n\n")
        rest = _read_until(fd, b"\x00never")
    except BaseException:
        os.kill(pid, signal.SIGKILL)  # a failed step left it waiting for an answer
        raise
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, (first + second + rest).decode()
    assert (project / "out" / "approved.txt").exists()
    assert not (project / "out" / "refused.txt").exists()


def test_without_a_terminal_an_ask_is_unavailable(tmp_path: Path, isolated_home: Path) -> None:
    project, argv = _project(tmp_path)
    done = subprocess.run(
        [*argv, "--json"], stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    vetoed = [e["data"] for e in events if e.get("kind") == "vetoed_call"]
    assert [v["code"] for v in vetoed] == ["approval-unavailable"] * 2
    assert not (project / "out" / "approved.txt").exists()
