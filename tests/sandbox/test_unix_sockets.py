"""No Unix socket on the file system outside the sandbox is reachable from a command, and a
command started by root runs as an unprivileged uid, under every OS backend.

Landlock does not govern connecting to a socket on the file system, so a D-Bus, Docker or
systemd socket would answer a Landlock-sandboxed command that could make a Unix socket; the
stand-ins here are a listening stream socket and a bound datagram socket in a folder outside
the checkout, both open to everyone (mode 0777), as the system bus is.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from membrane.builtin_tools.bash import bash_tool
from membrane.sandbox import SandboxPolicy
from membrane.tools.spec import ToolContext

pytestmark = pytest.mark.anyio

PY = sys.executable


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = (tmp_path / "checkout").resolve()
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "notes.txt").write_text("notes\n")
    return root


@pytest.fixture
def stand_ins(tmp_path: Path) -> Iterator[tuple[socket.socket, socket.socket, Path, Path]]:
    """``(bus, log, bus path, log path)``: a listening stream socket and a bound datagram
    socket outside the checkout, anyone may connect to."""
    folder = tmp_path / "run" / "dbus"
    folder.mkdir(parents=True)
    bus_path, log_path = folder / "system_bus_socket", folder / "log"
    with (
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bus,
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as log,
    ):
        bus.bind(str(bus_path))
        bus.listen(8)
        log.bind(str(log_path))
        for path in (bus_path, log_path):
            path.chmod(0o777)
        bus.settimeout(0)
        log.settimeout(0)
        yield bus, log, bus_path, log_path


def _probes(bus: Path, log: Path) -> list[str]:
    """Every way a command might reach the two sockets."""
    unix = "import socket; u = socket.AF_UNIX; "
    probes = [
        f"{PY} -c \"{unix}s = socket.socket(u); s.connect('{bus}'); s.send(b'leak')\"",
        f"{PY} -c \"{unix}s = socket.socket(u, socket.SOCK_DGRAM); s.sendto(b'leak', '{log}')\"",
        # A socket made some other way, then pointed at the socket outside.
        f'{PY} -c "{unix}a, b = socket.socketpair(u, socket.SOCK_DGRAM); '
        f"a.sendto(b'leak', '{log}')\"",
        f'{PY} -c "{unix}a, b = socket.socketpair(u, socket.SOCK_DGRAM); '
        f"a.connect('{log}'); a.send(b'leak')\"",
        f'{PY} -c "{unix}a, b = socket.socketpair(u, socket.SOCK_STREAM); '
        f"a.connect('{bus}'); a.send(b'leak')\"",
        f'{PY} -c "{unix}a, b = socket.socketpair(u, socket.SOCK_SEQPACKET); '
        f"a.sendto(b'leak', '{bus}')\"",
        f"exec 3<>{bus}; echo leak >&3",
        f"echo leak > {log}",
    ]
    if shutil.which("socat"):
        probes += [
            f"echo leak | socat - UNIX-CONNECT:{bus}",
            f"echo leak | socat - UNIX-SENDTO:{log}",
        ]
    if shutil.which("nc"):
        probes += [f"echo leak | nc -U -q0 {bus}", f"echo leak | nc -U -u -q0 {log}"]
    return probes


async def _bash(backend: str, command: str, checkout: Path, **context: object) -> dict[str, object]:
    network = bool(context.pop("network", False))
    tool = bash_tool(sandbox=SandboxPolicy(choice=backend, network=network))  # type: ignore[arg-type]
    with anyio.fail_after(60):
        result = await tool.handler(
            {"command": command},
            ToolContext(agent="a", cwd=checkout, **context),  # type: ignore[arg-type]
        )
    assert isinstance(result, dict)
    return result


@pytest.mark.parametrize("network", [False, True], ids=["network-off", "network-on"])
async def test_no_unix_socket_on_the_file_system_outside_is_reached(
    os_sandbox: str,
    checkout: Path,
    stand_ins: tuple[socket.socket, socket.socket, Path, Path],
    network: bool,
) -> None:
    bus, log, bus_path, log_path = stand_ins
    command = "; ".join(_probes(bus_path, log_path)) + "; echo ran"
    result = await _bash(os_sandbox, command, checkout, network=network)
    assert "ran" in str(result["stdout"]), result
    with pytest.raises(BlockingIOError):
        bus.accept()
    with pytest.raises(BlockingIOError):
        log.recv(64)


async def test_a_command_makes_socket_pairs_for_itself(os_sandbox: str, checkout: Path) -> None:
    """What programs use a Unix socket for inside themselves still works (asyncio's loop
    wakes itself through a socket pair)."""
    code = (
        "import asyncio, socket; a, b = socket.socketpair(); a.send(b'pair'); "
        "print(b.recv(4).decode()); print(asyncio.run(asyncio.sleep(0, 'loop')))"
    )
    result = await _bash(os_sandbox, f'{PY} -c "{code}"', checkout)
    assert result["stdout"] == "pair\nloop\n", result


@pytest.fixture
def as_root(os_sandbox: str) -> None:
    from membrane.sandbox.machine import landlock_user_namespace

    if os.geteuid() != 0:
        pytest.skip("Membrane does not run as root here")
    if os_sandbox == "landlock" and not landlock_user_namespace():
        pytest.skip("no user namespace can be made here: a Landlock command stays uid 0")


def _uid(status: str) -> int:
    line = next(line for line in status.splitlines() if line.startswith("Uid:"))
    return int(line.split()[1])


async def test_a_command_started_by_root_runs_as_an_unprivileged_uid_and_writes_its_checkout(
    os_sandbox: str, checkout: Path, as_root: None
) -> None:
    writer = await _bash(
        os_sandbox, "cat /proc/self/status; echo changed > notes.txt && echo WROTE", checkout
    )
    assert _uid(str(writer["stdout"])) == 65534, writer
    assert "WROTE" in str(writer["stdout"]), writer
    assert (checkout / "notes.txt").read_text() == "changed\n"
    reader = await _bash(
        os_sandbox, "cat /proc/self/status; echo again > notes.txt", checkout, read_only=True
    )
    assert _uid(str(reader["stdout"])) == 65534, reader
    assert (checkout / "notes.txt").read_text() == "changed\n"


async def test_a_command_started_by_root_sees_none_of_roots_ipc_objects(
    os_sandbox: str, checkout: Path, as_root: None
) -> None:
    if shutil.which("ipcs") is None:
        pytest.skip("ipcs (util-linux) is missing")
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x4D454D42  # a System V shared memory segment only root may attach (mode 0600)
    segment = libc.shmget(key, 4096, 0o1000 | 0o600)  # IPC_CREAT
    if segment < 0:
        pytest.skip(f"no System V shared memory here (errno {ctypes.get_errno()})")
    try:
        result = await _bash(os_sandbox, "ipcs -m", checkout)
    finally:
        libc.shmctl(segment, 0, None)  # IPC_RMID
    assert result["exit_code"] == 0, result
    assert f"{key:#010x}" not in str(result["stdout"]), result


async def test_a_command_holds_its_standard_streams_and_the_connector_and_nothing_else(
    os_sandbox: str, checkout: Path, tmp_path: Path
) -> None:
    """No descriptor of the sandbox's own machinery reaches the command: under Landlock it
    holds 0, 1 and 2, and the connector (3) when a runtime socket is named."""
    runtime = tmp_path / "runtime.sock"
    with socket.socket(socket.AF_UNIX) as served:
        served.bind(str(runtime))
        served.listen(1)
        result = await _bash(
            os_sandbox, "ls /proc/$$/fd; true", checkout, env={"MEMBRANE_SOCKET": str(runtime)}
        )
    held = sorted(str(result["stdout"]).split())
    assert held == (["0", "1", "2", "3"] if os_sandbox == "landlock" else ["0", "1", "2"]), result
