"""A sandboxed command holds no privilege, whoever starts Membrane (root included).

Run as root (as CI runs), these are the attacks that worked before: a command with root's
capabilities remounted its read-only checkout, or ``/``, read-write and wrote them. Run as
another user they must hold too. Each test goes through the ``Bash`` tool, under every OS
backend this machine offers.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from pathlib import Path

import anyio
import pytest

from membrane.builtin_tools.bash import bash_tool
from membrane.sandbox import SandboxPolicy
from membrane.tools.spec import ToolContext

pytestmark = pytest.mark.anyio


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = (tmp_path / "checkout").resolve()
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "notes.txt").write_text("notes\n")
    (root / ".membrane" / "agents").mkdir(parents=True)
    (root / ".membrane" / "agents" / "x.md").write_text("---\nname: x\n---\nx\n")
    return root


async def _run(
    backend: str, command: str, checkout: Path, *, read_only: bool = False, network: bool = False
) -> dict[str, object]:
    tool = bash_tool(sandbox=SandboxPolicy(choice=backend, network=network))  # type: ignore[arg-type]
    context = ToolContext(agent="a", cwd=checkout, read_only=read_only)
    with anyio.fail_after(30):
        result = await tool.handler({"command": command}, context)
    assert isinstance(result, dict)
    return result


def _status(text: str) -> dict[str, str]:
    fields = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {key: value.strip() for key, value in fields}


async def test_a_command_holds_no_capability_and_no_new_privileges(
    os_sandbox: str, checkout: Path
) -> None:
    result = await _run(os_sandbox, "cat /proc/self/status", checkout)
    status = _status(str(result["stdout"]))
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[key], 16) == 0, (key, status[key])
    assert status["NoNewPrivs"] == "1"


REMOUNTS = [
    "mount -o remount,rw,bind {checkout}",
    "mount -o remount,rw {checkout}",
    "mount -o remount,rw /",
    "mount -o remount,rw,bind /",
    "mount -t tmpfs none {checkout}",
    "unshare -Urm sh -c 'mount -o remount,rw,bind {checkout}; echo x > {checkout}/notes.txt'",
    "unshare -Urm sh -c 'mount -o remount,rw /; echo x > {checkout}/notes.txt'",
    "umount -l {checkout}",
]


@pytest.mark.parametrize("command", REMOUNTS)
async def test_a_read_only_child_cannot_remount_its_checkout_writable(
    os_sandbox: str, command: str, checkout: Path
) -> None:
    filled = command.format(checkout=checkout)
    await _run(os_sandbox, f"{filled}; echo changed > notes.txt", checkout, read_only=True)
    assert (checkout / "notes.txt").read_text() == "notes\n"


async def test_a_remount_of_the_root_fails(os_sandbox: str, checkout: Path) -> None:
    result = await _run(
        os_sandbox, "mount -o remount,rw / && echo remounted", checkout, read_only=True
    )
    assert result["exit_code"] != 0 and "remounted" not in str(result["stdout"]), result


@pytest.mark.parametrize(
    "command",
    [
        "mount -o remount,rw,bind {checkout}/.git; echo '[core] x = y' >> .git/config",
        "mount -o remount,rw,bind {checkout}/.membrane; echo x > .membrane/agents/x.md",
        "umount {checkout}/.membrane; echo x > .membrane/agents/x.md",
        "umount -l {checkout}/.git; echo '[core] x = y' >> .git/config",
    ],
)
async def test_a_writing_child_cannot_remount_its_control_paths(
    os_sandbox: str, command: str, checkout: Path
) -> None:
    config = (checkout / ".git" / "config").read_text()
    await _run(os_sandbox, command.format(checkout=checkout), checkout)
    assert (checkout / ".git" / "config").read_text() == config
    assert (checkout / ".membrane" / "agents" / "x.md").read_text() == "---\nname: x\n---\nx\n"


async def test_no_socket_of_any_family_but_unix_with_the_network_off(
    os_sandbox: str, checkout: Path
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(0)
        port = server.getsockname()[1]
        probe = (
            f'{sys.executable} -c "import socket; s = socket.socket(socket.AF_INET, '
            f"socket.SOCK_DGRAM); s.sendto(b'leak', ('127.0.0.1', {port})); print('sent')\""
        )
        result = await _run(os_sandbox, probe, checkout)
        # Sent or refused inside, nothing reached the host's loopback.
        with pytest.raises(BlockingIOError):
            server.recvfrom(16)
    assert result["exit_code"] is not None, result


async def test_no_abstract_unix_socket_outside_is_reached_with_the_network_off(
    os_sandbox: str, checkout: Path
) -> None:
    """bubblewrap: abstract sockets belong to the network namespace; Landlock: refused by its
    scope from ABI 6 (skipped below it, where the docs say they are reachable)."""
    from membrane.sandbox import machine_support

    if os_sandbox == "landlock" and machine_support().landlock_abi < 6:
        pytest.skip("Landlock below ABI 6 does not scope abstract Unix sockets")
    name = f"membrane-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind("\0" + name)
        server.listen()
        server.settimeout(0)
        probe = (
            f'{sys.executable} -c "import socket; s = socket.socket(socket.AF_UNIX); '
            f"s.connect('\\0{name}'); s.send(b'leak'); print('connected')\""
        )
        result = await _run(os_sandbox, probe, checkout)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert "connected" not in str(result["stdout"]), result
