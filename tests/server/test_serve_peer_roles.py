"""``[peer_roles]``: a tokenless caller of another uid the global settings name gets the role
they give it (DESIGN rule 11, "the settings' default for the peer's uid"), through a real
``membrane serve`` and a real second uid. The socket stays 0600 in a 0700 folder, opened by a
POSIX ACL to exactly the named uids: a uid the settings do not name cannot even connect. The
server's own uid cannot be named (its tokenless callers stay ``external``), and another uid
presenting the owner's token is not the owner.

The second uid needs root to switch to (``setpriv``): elsewhere these tests skip, saying so."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import START_BOUND, clean_env, launch, make_project, serve, stop

NOBODY = 65534
#: A uid no setting names (and no account needs to exist for it).
STRANGER = 65533

GLOBAL = f"""\
[roles.ops]
allow = ["Read", "Grep", "Glob"]

[peer_roles]
{NOBODY} = "ops"
"""

# A client as another uid, on the system's Python alone: one ``initialize``, its reply printed.
CLIENT = """
import json, socket, sys
sock = socket.socket(socket.AF_UNIX)
try:
    sock.connect(sys.argv[1])
except OSError as exc:
    print(json.dumps({"connect": exc.errno}))
    raise SystemExit
identity = json.loads(sys.argv[2])
frame = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"identity": identity}}
sock.sendall(json.dumps(frame).encode() + b"\\n")
data = b""
while not data.endswith(b"\\n"):
    chunk = sock.recv(65536)
    if not chunk:
        break
    data += chunk
print(data.decode() or json.dumps({"closed": True}))
"""


def _switch(uid: int) -> list[str]:
    """The command line prefix that runs a program as ``uid``, with no groups."""
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


@functools.cache
def _interpreter() -> str | None:
    """An interpreter ``nobody`` can start (the client needs the standard library alone)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, shutil.which("python3"), f"/usr/bin/{version}"):
        if candidate and os.path.exists(candidate):
            probe = subprocess.run(
                [
                    "setpriv",
                    f"--reuid={NOBODY}",
                    f"--regid={NOBODY}",
                    "--clear-groups",
                    candidate,
                    "-I",
                    "-c",
                    "",
                ],
                capture_output=True,
                timeout=START_BOUND,
                cwd="/",
            )
            if probe.returncode == 0:
                return candidate
    return None


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "switching to a second uid needs root (setpriv)"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    if _interpreter() is None:
        return "nobody can start no Python interpreter here"
    probe = Path(tempfile.mkdtemp())
    try:
        os.setxattr(probe, "system.posix_acl_access", b"\x02\x00\x00\x00")
    except OSError as exc:
        if exc.errno != 22:  # EINVAL: ACLs are kept here, the empty one is just not one
            return f"this file system keeps no POSIX ACLs ({exc.strerror})"
    finally:
        probe.rmdir()
    return None


_SKIP = _skip_reason()
pytestmark = pytest.mark.skipif(_SKIP is not None, reason=str(_SKIP))


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder any uid may pass through (the socket's own folder stays private)."""
    folder = Path(tempfile.mkdtemp(prefix="membrane-peers-"))
    folder.chmod(0o711)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _as(uid: int, socket: Path, identity: dict[str, str]) -> dict[str, object]:
    """What ``uid``'s client was answered (or how its connect failed)."""
    done = subprocess.run(
        [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            str(_interpreter()),
            "-I",
            "-c",
            CLIENT,
            str(socket),
            json.dumps(identity),
        ],
        capture_output=True,
        text=True,
        timeout=START_BOUND,
        cwd="/",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_uid_the_settings_name_gets_its_role_and_no_other_uid_connects(
    base: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(GLOBAL)
    make_project(tmp_path / "project")
    socket = base / "sock" / "m.sock"
    proc = serve(socket, home)
    try:
        named = _as(NOBODY, socket, {"role": "admin"})
        token = (home / "owner.token").read_text().strip()
        with_owner_token = _as(NOBODY, socket, {"ownerToken": token})
        stranger = _as(STRANGER, socket, {})
        folder_mode = (socket.parent.stat().st_mode & 0o777, socket.stat().st_mode & 0o777)
    finally:
        stop(proc)
    # The named uid is let in with its role; what it claims for itself grants nothing.
    assert named["result"]["caller"] == {  # type: ignore[index]
        "role": "ops",
        "sessionId": None,
        "runId": None,
        "owner": False,
    }
    # The owner's token proves the owner only from the owner's own uid.
    assert with_owner_token["result"]["caller"]["owner"] is False  # type: ignore[index]
    assert with_owner_token["result"]["caller"]["role"] == "ops"  # type: ignore[index]
    # Any other uid is kept out by the file system before the server sees it (EACCES).
    assert stranger == {"connect": 13}
    # For everyone but the named uid (through the ACL's mask) the modes are the private ones.
    assert folder_mode == (0o710, 0o660)


def test_without_peer_roles_another_uid_cannot_connect(base: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    socket = base / "sock" / "m.sock"
    proc = serve(socket, home)
    try:
        answered = _as(NOBODY, socket, {})
        modes = (socket.parent.stat().st_mode & 0o777, socket.stat().st_mode & 0o777)
    finally:
        stop(proc)
    assert answered == {"connect": 13}
    assert modes == (0o700, 0o600)


def test_a_restart_without_the_uid_takes_its_access_back(base: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.toml"
    config.write_text(GLOBAL)
    socket = base / "sock" / "m.sock"
    stop(serve(socket, home))
    config.write_text("")
    proc = serve(socket, home)
    try:
        answered = _as(NOBODY, socket, {})
    finally:
        stop(proc)
    assert answered == {"connect": 13}


def test_the_servers_own_uid_cannot_be_named(base: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[roles.ops]\nallow = ["Read"]\n\n[peer_roles]\n{os.getuid()} = "ops"\n'
    )
    proc = launch(base / "sock" / "m.sock", home, env=clean_env(home))
    try:
        proc.wait(timeout=START_BOUND)
    finally:
        stop(proc)  # one that came up after all is stopped, and fails below
    assert proc.stderr is not None
    said = proc.stderr.read()
    assert proc.returncode != 0, said
    assert "settings-invalid" in said and f"[peer_roles] names uid {os.getuid()}" in said
