"""The socket's boundary, with ``membrane serve`` run by an unprivileged user (``nobody``,
through ``setpriv``) where the tests run as root, as CI does: the same rules must hold whoever
starts it. A peer of another uid is refused, also root (who passes every file mode, so only the
server's own check stands); a uid the file modes keep out cannot connect; the server's own user
without a token is ``external`` whatever it claims, a forged token is ``token-invalid``, and
only the owner's token makes the owner. The socket, its folder and the owner's token are
private to ``nobody``.

The test's own environment may lie where ``nobody`` cannot read (a checkout in root's private
home folder), so the ``membrane`` package is copied to a folder that user can read; its
dependencies come from the interpreter's own site-packages. Skipped, with the reason, where
``nobody`` cannot start an interpreter that imports them.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import START_BOUND, wait_listening

import membrane

NOBODY = 65534
#: A uid no file mode lets in (no account needs to exist for it).
STRANGER = 65533

# A client on the standard library alone: sends each frame of argv[2] (a JSON list) in turn and
# prints each reply, or how its connect failed.
CLIENT = """
import json, socket, sys
sock = socket.socket(socket.AF_UNIX)
try:
    sock.connect(sys.argv[1])
except OSError as exc:
    print(json.dumps([{"connect": exc.errno}]))
    raise SystemExit
replies = []
buffered = b""
for frame in json.loads(sys.argv[2]):
    sock.sendall(json.dumps(frame).encode() + b"\\n")
    while b"\\n" not in buffered:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buffered += chunk
    line, _, buffered = buffered.partition(b"\\n")
    replies.append(json.loads(line) if line else {"closed": True})
print(json.dumps(replies))
"""


def _switch(uid: int) -> list[str]:
    """The command line prefix that runs a program as ``uid``, with no groups or capabilities."""
    ids = [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return ["setpriv", *ids, "--inh-caps=-all", "--bounding-set=-all"]


@pytest.fixture(scope="module")
def library() -> Iterator[Path]:
    """A copy of the ``membrane`` package that ``nobody`` can read, once that user can start
    this interpreter with it and its dependencies (else the module is skipped, saying why)."""
    if os.geteuid() != 0:
        pytest.skip("the tests run unprivileged already: no other user to switch to")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is missing, so nothing can run as nobody")
    # Not under pytest's own temporary folder: its /tmp/pytest-of-root is private to root.
    base = Path(tempfile.mkdtemp(prefix="membrane-serve-unprivileged-"))
    base.chmod(0o755)
    folder = base / "library"
    shutil.copytree(
        Path(membrane.__file__).parent,
        folder / "membrane",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for path in (folder, *folder.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    try:
        probe = subprocess.run(
            [*_switch(NOBODY), sys.executable, "-c", "import membrane.cli, membrane.server"],
            capture_output=True,
            text=True,
            timeout=START_BOUND,
            cwd="/",
            env={"PATH": os.environ.get("PATH", os.defpath), "PYTHONPATH": str(folder)},
        )
        if probe.returncode != 0:
            last = (probe.stderr.strip().splitlines() or ["?"])[-1]
            pytest.skip(
                f"nobody cannot start this interpreter with Membrane's dependencies: {last}"
            )
        yield folder
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def served(library: Path) -> Iterator[tuple[Path, Path]]:
    """A ``membrane serve`` run by nobody: (socket, its home)."""
    base = Path(tempfile.mkdtemp(prefix="membrane-serve-nobody-"))
    base.chmod(0o711)
    home = base / "home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    home.chmod(0o700)
    path = base / "run" / "m.sock"
    path.parent.mkdir()
    os.chown(path.parent, NOBODY, NOBODY)
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "PYTHONPATH": str(library),
        "HOME": str(home),
        "MEMBRANE_HOME": str(home),
    }
    proc = subprocess.Popen(
        [*_switch(NOBODY), sys.executable, "-m", "membrane", "serve", "--socket", str(path)],
        env=env,
        cwd="/",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_listening(proc)
        yield path, home
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=START_BOUND)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(base, ignore_errors=True)


def _initialize(identity: dict[str, str]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"identity": identity}}


def _as(uid: int, path: Path, *frames: dict[str, object]) -> list[dict[str, object]]:
    """What ``uid``'s client was answered, frame by frame (or how its connect failed)."""
    done = subprocess.run(
        [*_switch(uid), sys.executable, "-I", "-c", CLIENT, str(path), json.dumps(frames)],
        capture_output=True,
        text=True,
        timeout=START_BOUND,
        cwd="/",
        env={"PATH": os.environ.get("PATH", os.defpath)},
    )
    assert done.returncode == 0, done.stderr
    replies = json.loads(done.stdout)
    assert isinstance(replies, list)
    return replies


def _code(reply: dict[str, object]) -> str:
    error = reply.get("error")
    assert isinstance(error, dict), reply
    return str(error["data"]["code"])


def test_the_socket_folder_and_token_are_private_to_the_user_that_serves(
    served: tuple[Path, Path],
) -> None:
    path, home = served
    for place, mode in ((path, 0o600), (path.parent, 0o700), (home / "owner.token", 0o600)):
        info = place.stat()
        assert (info.st_uid, info.st_mode & 0o777) == (NOBODY, mode), place


def test_root_is_refused_by_the_server_though_no_file_mode_stops_it(
    served: tuple[Path, Path],
) -> None:
    path, home = served
    token = (home / "owner.token").read_text().strip()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(START_BOUND)
        sock.connect(str(path))  # root passes the 0600 socket's mode
        sock.sendall(json.dumps(_initialize({"ownerToken": token})).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    reply = json.loads(data)
    # Even with the owner's token in hand: another uid is refused before any of it is read.
    assert _code(reply) == "caller-refused"
    assert reply["error"]["data"]["uid"] == 0


def test_another_uid_cannot_reach_the_socket(served: tuple[Path, Path]) -> None:
    path, _ = served
    assert _as(STRANGER, path, _initialize({})) == [{"connect": 13}]


def test_the_serving_user_proves_nothing_without_the_owners_token(
    served: tuple[Path, Path],
) -> None:
    path, home = served
    token = (home / "owner.token").read_text().strip()
    forged = "mt1.eyJ4IjoxfQ." + "0" * 64
    claimed, forgery, owner = (
        _as(NOBODY, path, _initialize(identity))[0]
        for identity in (
            {"role": "admin", "sessionId": "mine", "ownerId": "root"},
            {"token": forged},
            {"ownerToken": token, "role": "ops"},
        )
    )
    caller = claimed["result"]["caller"]  # type: ignore[index]
    assert caller == {"role": "external", "sessionId": "mine", "runId": None, "owner": False}
    assert _code(forgery) == "token-invalid"
    assert owner["result"]["caller"]["owner"] is True  # type: ignore[index]
    assert owner["result"]["caller"]["role"] == "ops"  # type: ignore[index]
