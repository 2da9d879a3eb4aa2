"""Ctrl-C in a real pseudo-terminal: during ``membrane run`` the run is stopped cleanly, the
output says what was stopped and how to resume it, and the exit code is 130; any other command
(``actions run`` waiting on its tool) stops with one ``interrupted`` line, exit code 130 too."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from membrane.store.location import locate_state

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="needs a Linux pseudo-terminal")

LEAD = "---\nname: lead\ndescription: Waits.\ntools: Bash\n---\nWait.\n"
SCRIPT = """\
agents:
  lead:
    - tool_calls: [{name: Bash, arguments: {command: "sleep 120"}}]
    - text: done waiting
"""


#: Terminal colour codes: the error's code is drawn bold red on a terminal.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _read_until(fd: int, wanted: bytes, *, bound: float = 60.0) -> bytes:
    """Read the terminal until ``wanted`` appears (or EOF); the bound only stops a hung test."""
    seen = b""
    deadline = time.monotonic() + bound
    while wanted not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break  # EIO: the child closed the terminal
        if not chunk:
            break
        seen += chunk
    return seen


def test_ctrl_c_stops_the_run_says_how_to_resume_and_exits_130(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = tmp_path / "project"
    (project / ".membrane" / "agents").mkdir(parents=True)
    (project / ".membrane" / "agents" / "lead.md").write_text(LEAD, encoding="utf-8")
    script = tmp_path / "script.yaml"
    script.write_text(SCRIPT, encoding="utf-8")
    argv = [sys.executable, "-m", "membrane", "run", "lead", "wait", "--project", str(project)]
    argv += ["--model", f"scripted:{script}"]
    env = {**os.environ, "COLUMNS": "200", "TERM": "xterm"}
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child process
        os.execve(sys.executable, argv, env)
    try:
        # The live tree names the call the run is in.
        assert b"last call Bash" in _read_until(fd, b"last call Bash")
        os.write(fd, b"\x03")  # Ctrl-C, as the terminal driver delivers it: SIGINT
        out = _read_until(fd, b"\x00never")
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    text = _ANSI.sub("", out.decode("utf-8", "replace"))
    assert os.waitstatus_to_exitcode(status) == 130, text
    assert "interrupted: stopped lead (" in text
    assert "membrane resume " in text
    state = locate_state(project.resolve(), home=isolated_home).path
    with sqlite3.connect(state) as db:
        [(status_value,)] = db.execute("SELECT status FROM sessions").fetchall()
    assert status_value == "stopped"


def _interrupt(argv: list[str], ready: Path, *, bound: float = 60.0) -> tuple[int, str]:
    """Run ``membrane argv`` on a pseudo-terminal, press Ctrl-C once the file ``ready``
    exists, and return its exit code and everything it printed."""
    env = {**os.environ, "COLUMNS": "200", "TERM": "xterm"}
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child process
        os.execve(sys.executable, [sys.executable, "-m", "membrane", *argv], env)
    try:
        out = b""
        deadline = time.monotonic() + bound
        while not ready.exists() and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                out += os.read(fd, 65536)
        assert ready.exists(), out
        os.write(fd, b"\x03")
        out += _read_until(fd, b"\x00never")
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), _ANSI.sub("", out.decode("utf-8", "replace"))


@pytest.mark.parametrize("as_json", [False, True])
def test_ctrl_c_in_any_other_command_exits_130_with_one_line(
    tmp_path: Path, isolated_home: Path, as_json: bool
) -> None:
    project = tmp_path / "project"
    (project / ".membrane").mkdir(parents=True)
    (project / ".membrane" / "config.toml").write_text(
        '[roles.ops]\nallow = ["Bash"]\n', encoding="utf-8"
    )
    # Inside the checkout, the only place the tool may write, and in a folder of it: under
    # Landlock (the sandbox where no bwrap is) nothing new can be made at its top level.
    (project / "out").mkdir()
    marker = project / "out" / "started"
    command = f"touch {marker} && sleep 120"
    argv = ["actions", "run", "Bash", "--args", json.dumps({"command": command})]
    argv += ["--project", str(project), "--role", "ops", "--headless"]
    # Ctrl-C once the tool runs: the command is waiting on it.
    code, text = _interrupt([*argv, *(["--json"] if as_json else [])], marker)
    assert code == 130, text
    lines = [line for line in text.replace("^C", "").splitlines() if line.strip()]
    assert len(lines) == 1, text
    if as_json:
        failure = json.loads(lines[0])
        assert failure["exit_code"] == 130
        assert failure["error"]["code"] == "interrupted"
        assert "membrane actions run was stopped by Ctrl-C" in failure["error"]["message"]
    else:
        assert lines[0] == "interrupted: membrane actions run was stopped by Ctrl-C"
