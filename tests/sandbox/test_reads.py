"""Reads stay home (DESIGN rule 14): a child reads its checkout, the read roots and the
system's folders, and never Membrane's state, another project or a secret place, whether it
asks the built-in tools or runs ``cat`` under an OS sandbox.

Each case has a readable twin beside the refused file, so a test that refuses everything (a
broken sandbox) fails too. The home folder is a fake one in the test's folder, named as a read
root so that the secret places inside it are what hides them, not the private ``/tmp``.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import anyio
import pytest

from membrane.builtin_tools import builtin_tools
from membrane.errors import PathOutsideCheckout
from membrane.sandbox import SandboxPolicy
from membrane.tools.spec import ToolContext

pytestmark = pytest.mark.anyio


class Places:
    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.shared = root / "shared"
        self.state = self.shared / "membrane-home"
        self.checkout = root / "project"
        self.other = root / "other-project"
        for folder in (self.home / ".ssh", self.checkout, self.other):
            folder.mkdir(parents=True)
        (self.home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
        (self.home / "notes.txt").write_text("home notes\n")
        (self.home / ".env").write_text("TOKEN=secret\n")
        (self.other / "secret.txt").write_text("other project\n")
        (self.checkout / "mine.txt").write_text("mine\n")
        self.shared.mkdir()
        (self.shared / "readme.txt").write_text("shared\n")
        (self.checkout / ".env").write_text("OWN=1\n")
        db = self.state / "projects" / "p1" / "state.db"
        db.parent.mkdir(parents=True)
        with sqlite3.connect(db) as connection:
            connection.execute("CREATE TABLE runs (task TEXT)")
            connection.execute("INSERT INTO runs VALUES ('the other run''s secret task')")
        connection.close()
        self.db = db


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Places:
    found = Places(tmp_path.resolve())
    monkeypatch.setenv("HOME", str(found.home))
    monkeypatch.setenv("MEMBRANE_HOME", str(found.state))
    return found


def _policy(backend: str, places: Places) -> SandboxPolicy:
    # The home folder and the state's parent folder are read roots: what stays hidden inside
    # them is hidden by the rule, not because nothing outside the checkout is shown.
    return SandboxPolicy(choice=backend, read_paths=(places.home, places.shared))  # type: ignore[arg-type]


def _refused(places: Places) -> list[Path]:
    return [
        Path("/etc/shadow"),
        places.home / ".ssh" / "id_rsa",
        places.home / ".env",
        places.db,
        places.other / "secret.txt",
    ]


def _allowed(places: Places) -> list[Path]:
    return [
        Path("/etc/passwd"),
        places.home / "notes.txt",
        places.shared / "readme.txt",
        places.checkout / "mine.txt",
    ]


async def _tool(name: str, policy: SandboxPolicy, arguments: dict[str, object], cwd: Path) -> str:
    tool = next(t for t in builtin_tools(sandbox=policy) if t.name == name)
    with anyio.fail_after(30):
        result = await tool.handler(arguments, ToolContext(agent="a", cwd=cwd, read_only=True))
    return str(result)


async def test_the_built_in_tools_read_only_at_home(places: Places) -> None:
    policy = _policy("guard", places)
    for path in _allowed(places):
        assert await _tool("Read", policy, {"file_path": str(path)}, places.checkout)
    for path in _refused(places):
        with pytest.raises(PathOutsideCheckout) as info:
            await _tool("Read", policy, {"file_path": str(path)}, places.checkout)
        assert info.value.code == "path-outside-checkout", path
    with pytest.raises(PathOutsideCheckout):
        await _tool("Read", policy, {"file_path": f"/proc/{os.getpid()}/environ"}, places.checkout)
    for name in ("Grep", "Glob"):
        arguments = {"pattern": "t", "path": str(places.state)}
        with pytest.raises(PathOutsideCheckout):
            await _tool(name, policy, arguments, places.checkout)
    # A link inside the checkout to a hidden place is refused by Read and skipped by Grep.
    (places.checkout / "key").symlink_to(places.home / ".ssh" / "id_rsa")
    with pytest.raises(PathOutsideCheckout):
        await _tool("Read", policy, {"file_path": "key"}, places.checkout)
    found = await _tool("Grep", policy, {"pattern": "PRIVATE|mine"}, places.checkout)
    assert "key" not in found and "mine.txt" in found
    # Glob in the home folder (a read root) does not list what lies in its secret places.
    listed = await _tool("Glob", policy, {"pattern": "**/*", "path": "~"}, places.checkout)
    assert "notes.txt" in listed and "id_rsa" not in listed, listed
    # The checkout's own .env is the child's to read; one outside it is not.
    assert "OWN=1" in await _tool("Read", policy, {"file_path": ".env"}, places.checkout)


async def test_a_rule_that_names_a_secret_place_exactly_shows_it(places: Places) -> None:
    policy = SandboxPolicy(choice="guard", read_paths=(places.home / ".ssh",))
    found = await _tool("Read", policy, {"file_path": "~/.ssh/id_rsa"}, places.checkout)
    assert "PRIVATE KEY" in found
    # Membrane's state stays hidden whatever a rule says.
    named = SandboxPolicy(choice="guard", read_paths=(places.db.parent,))
    with pytest.raises(PathOutsideCheckout):
        await _tool("Read", named, {"file_path": str(places.db)}, places.checkout)


async def _cat(backend: str, places: Places, path: Path) -> dict[str, object]:
    return await _bash(_policy(backend, places), f"cat {path}", places.checkout)


async def _bash(policy: SandboxPolicy, command: str, cwd: Path) -> dict[str, object]:
    tool = next(t for t in builtin_tools(sandbox=policy) if t.name == "Bash")
    context = ToolContext(agent="a", cwd=cwd, read_only=True)
    with anyio.fail_after(30):
        result = await tool.handler({"command": command}, context)
    assert isinstance(result, dict)
    return result


async def test_a_sandboxed_command_reads_only_at_home(os_sandbox: str, places: Places) -> None:
    for path in _allowed(places):
        result = await _cat(os_sandbox, places, path)
        assert result["exit_code"] == 0 and result["stdout"], (path, result)
    for path in [p for p in _refused(places) if p.name != ".env"]:
        result = await _cat(os_sandbox, places, path)
        assert result["exit_code"] != 0, (path, result)
        assert "PRIVATE" not in str(result["stdout"]) and "secret" not in str(result["stdout"])
        assert "root:" not in str(result["stdout"]), path
    policy = _policy(os_sandbox, places)
    query = (
        "python3 -c \"import sqlite3; print(sqlite3.connect('file:"
        f"{places.db}?mode=ro', uri=True).execute('select task from runs').fetchall())\""
    )
    result = await _bash(policy, query, places.checkout)
    assert "secret task" not in str(result["stdout"]), result
    result = await _bash(policy, f"cat /proc/{os.getpid()}/environ", places.checkout)
    assert result["exit_code"] != 0 and "MEMBRANE_HOME" not in str(result["stdout"]), result


async def test_the_settings_name_the_read_roots(places: Places) -> None:
    from membrane.config.load import load_settings
    from membrane.errors import SettingsError

    config = places.checkout / ".membrane" / "config.toml"
    config.parent.mkdir()
    config.write_text('read_paths = ["~/"]\nsandbox = "guard"\n')
    settings = load_settings(project=places.checkout, home=places.state)
    policy = SandboxPolicy.from_settings(settings)
    found = await _tool("Read", policy, {"file_path": "~/notes.txt"}, places.checkout)
    assert "home notes" in found
    with pytest.raises(PathOutsideCheckout):
        await _tool("Read", policy, {"file_path": "~/.ssh/id_rsa"}, places.checkout)
    config.write_text('read_paths = ["relative/folder"]\n')
    with pytest.raises(SettingsError) as info:
        load_settings(project=places.checkout, home=places.state)
    assert info.value.code == "settings-invalid" and "read_paths" in info.value.message


async def test_a_command_reaches_the_runtime_socket_and_nothing_beside_it(
    os_sandbox: str, places: Places
) -> None:
    import socket

    folder = places.state / "sock"
    folder.mkdir(mode=0o700)
    (folder / "owner.token").write_text("owner secret\n")
    path = folder / "membrane.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen(1)
        tool = next(
            t for t in builtin_tools(sandbox=_policy(os_sandbox, places)) if t.name == "Bash"
        )
        context = ToolContext(
            agent="a", cwd=places.checkout, read_only=True, env={"MEMBRANE_SOCKET": str(path)}
        )
        # Under Landlock the command may make no Unix socket: it asks the connector Membrane
        # hands it ($MEMBRANE_SOCKET_FD) for a connection, as the membrane client does.
        connect = (
            f'{sys.executable} -c "import os; from membrane.server.client import Client; '
            "import anyio; anyio.run(Client.connect(os.environ['MEMBRANE_SOCKET']).__aenter__); "
            "print('connected')\""
        )
        command = f"{connect}; cat {folder}/owner.token; ls {folder}"
        with anyio.fail_after(30):
            result = await tool.handler({"command": command}, context)
    assert isinstance(result, dict)
    assert "connected" in str(result["stdout"]), result
    assert "owner secret" not in str(result["stdout"]), result
    if os_sandbox == "bubblewrap":  # Landlock lets a folder around a hidden place be listed
        assert "owner.token" not in str(result["stdout"]), result
