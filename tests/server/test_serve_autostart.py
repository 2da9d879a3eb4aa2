"""Project commands are runtime-backed by default: with no runtime answering, ``membrane run``
starts ``membrane serve`` in the background, the next command reuses it, and a runtime started
that way exits by itself once idle; ``--headless`` and ``MEMBRANE_HEADLESS=1`` start none."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from server_support import READER_SCRIPT, START_BOUND, clean_env, make_project

from membrane.server.transport import SocketLock, probe_socket

pytestmark = pytest.mark.anyio

PY = sys.executable
RUN_ID = re.compile(r"\b[0-9a-f]{8,}(?:-[0-9a-f]+)*\b")


class Place:
    """A private home, socket and project; the runtime a test's commands started, if any, is
    stopped at teardown."""

    def __init__(self, base: Path) -> None:
        self.home = base / "home"
        self.home.mkdir()
        self.project = make_project(base / "project")
        self.socket = base / "sock" / "m.sock"
        self.script = base / "script.json"
        self.script.write_text(json.dumps(READER_SCRIPT))

    def cli(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        # clean_env drops every MEMBRANE_ variable, MEMBRANE_HEADLESS included.
        return subprocess.run(
            [PY, "-m", "membrane", *args, "--project", str(self.project)],
            env=clean_env(self.home, MEMBRANE_SOCKET=str(self.socket), COLUMNS="200", **env),
            capture_output=True,
            text=True,
            timeout=START_BOUND * 2,
        )

    def run(self, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
        model = f"scripted:{self.script}"
        return self.cli("run", "reader", "look", "--model", model, *extra, **env)

    def doctor(self) -> dict[str, object]:
        done = self.cli("doctor", "--json")
        assert done.returncode in (0, 1), done.stderr
        runtime = json.loads(done.stdout)["runtime"]
        assert isinstance(runtime, dict)
        return runtime

    def log(self) -> str:
        """What the runtimes started in the background wrote."""
        return (self.home / "logs" / "serve.log").read_text()

    def server_pid(self) -> int | None:
        """The pid of the live ``membrane serve`` holding this socket's lock, if any."""
        pid = SocketLock(self.socket).holder()
        if pid is None:
            return None
        try:  # empty once it has exited (a zombie has no command line)
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        return pid if b"serve" in cmdline and str(self.socket).encode() in cmdline else None


def _lock_free(place: Place) -> bool:
    """Whether no process holds the socket's lock (a runtime holds it until it exits)."""
    fd = os.open(SocketLock(place.socket).path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


async def _gone(place: Place) -> None:
    """Wait (bounded) until the runtime has let go of its socket's lock, the last thing it
    does as it exits; the test asserts no duration."""
    with anyio.fail_after(START_BOUND):
        while not _lock_free(place):
            await anyio.sleep(0.05)


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Place]:
    here = Place(tmp_path)
    try:
        yield here
    finally:
        pid = here.server_pid()
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            anyio.run(_gone, here)


async def test_run_starts_a_runtime_and_the_next_command_reuses_it(place: Place) -> None:
    assert not place.doctor()["answers"]
    done = place.run("--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["kind"] == "result" and result["text"] == "reader is done"
    runtime = place.doctor()
    assert runtime["answers"]
    info = runtime["runtimeInfo"]
    assert isinstance(info, dict)
    pid = place.server_pid()
    assert pid is not None and info["pid"] == pid and info["socketPath"] == str(place.socket)
    # Its output goes to a log under the state home, and it listens detached from the command.
    assert f"listening on {place.socket} (pid {pid}" in place.log()
    assert os.getsid(pid) == pid

    # The next commands use the same runtime, which holds the first run.
    listed = place.cli("runs", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["run_id"]: row for row in json.loads(listed.stdout)["runs"]}
    assert rows[result["run_id"]]["status"] == "completed"
    again = place.run("--json")
    assert again.returncode == 0, again.stderr
    assert place.server_pid() == pid
    model = f"scripted:{place.script}"
    resumed = place.cli("resume", result["run_id"], "once more", "--model", model, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert place.doctor()["runtimeInfo"] == info


async def test_an_idle_runtime_started_by_a_command_exits_by_itself(place: Place) -> None:
    done = place.cli("actions", "list", "--json", MEMBRANE_IDLE_EXIT="0.5")
    assert done.returncode == 0, done.stderr
    names = [action["name"] for action in json.loads(done.stdout)["actions"]]
    assert "Read" in names
    # The runtime the command started (it may have exited already: the lock keeps its pid).
    pid = SocketLock(place.socket).holder()
    assert pid is not None
    assert f"listening on {place.socket} (pid {pid}" in place.log()
    # No connection and no run in flight: it drains, removes its socket and exits.
    await _gone(place)
    assert not place.socket.exists()
    assert not place.doctor()["answers"]
    # The next command starts another.
    listed = place.cli("runs", "--json", MEMBRANE_IDLE_EXIT="0.5")
    assert listed.returncode == 0, listed.stderr
    second = SocketLock(place.socket).holder()
    assert second is not None and second != pid
    assert f"listening on {place.socket} (pid {second}" in place.log()


async def test_headless_starts_no_runtime_and_prints_the_same(place: Place) -> None:
    # The person's own settings give unauthenticated callers of their runtime the ops role
    # (Read and Bash, the reader's tools), so a runtime-backed run sees what a headless one,
    # run with the person's own authority, sees.
    (place.home / "config.toml").write_text(
        'default_role = "ops"\n[roles.ops]\nallow = ["Read", "Glob", "Grep", "Write", "Bash"]\n'
    )
    local = place.run("--headless")
    assert local.returncode == 0, local.stderr
    for args in (("runs", "--headless"), ("actions", "list", "--headless")):
        done = place.cli(*args)
        assert done.returncode == 0, done.stderr
    by_env = place.run(MEMBRANE_HEADLESS="1")
    assert by_env.returncode == 0, by_env.stderr
    assert not probe_socket(place.socket) and place.server_pid() is None
    assert not (place.home / "logs" / "serve.log").exists()

    backed = place.run()
    assert backed.returncode == 0, backed.stderr
    assert place.server_pid() is not None
    assert "reader is done" in backed.stdout
    assert RUN_ID.sub("ID", backed.stdout) == RUN_ID.sub("ID", local.stdout)


def test_a_bad_idle_exit_value_is_refused(place: Place) -> None:
    done = place.cli("actions", "list", MEMBRANE_IDLE_EXIT="soon")
    assert done.returncode == 2
    assert done.stderr.startswith("invalid-request:") and "MEMBRANE_IDLE_EXIT" in done.stderr
    assert place.server_pid() is None
    served = subprocess.run(
        [PY, "-m", "membrane", "serve", "--socket", str(place.socket), "--idle-exit", "-1"],
        env=clean_env(place.home),
        capture_output=True,
        text=True,
        timeout=START_BOUND,
    )
    assert served.returncode == 2 and "--idle-exit" in served.stderr
    assert not place.socket.exists()
