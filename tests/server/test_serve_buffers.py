"""The partial request lines that all connections of a real ``membrane serve`` hold together
are bounded by ``server_max_buffered_bytes``: many peers each sending a large line they never
finish cannot grow the server past it. The connection whose line would pass the bound is
answered ``too-many-buffered-bytes`` and closed; the others are served as before, and what a
closed connection held is given back."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import START_BOUND, Running, make_project, serve, stop

#: Each peer's line: about 700 KB, under the 1 MiB a single line may have.
PAD = 700_000
#: Four such lines fit in the bound, a fifth does not.
LIMIT = 3_000_000
PEERS = 6

HEAD = b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"clientInfo": {"pad": "'
TAIL = b'"}}}\n'


@pytest.fixture
def bounded(tmp_path: Path) -> Iterator[Running]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f"server_max_buffered_bytes = {LIMIT}\n")
    project = make_project(tmp_path / "project")
    socket_path = tmp_path / "sock" / "m.sock"
    proc = serve(socket_path, home)
    try:
        yield Running(socket=socket_path, home=home, project=project, pid=proc.pid)
    finally:
        stop(proc)


def _reply(sock: socket.socket) -> dict[str, object] | None:
    """The first line the server wrote on ``sock`` (``None``: it closed with none)."""
    data = b""
    while not data.endswith(b"\n"):
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return json.loads(data) if data else None


def _outcome(reply: dict[str, object] | None) -> str:
    if reply is None:
        return "closed"
    if "result" in reply:
        return "served"
    error = reply.get("error")
    assert isinstance(error, dict), reply
    return str(error["data"]["code"])


def test_partial_lines_of_all_peers_are_bounded_together(bounded: Running) -> None:
    peers = []
    try:
        # Every peer sends most of one line and holds it open.
        for _ in range(PEERS):
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(START_BOUND)
            sock.connect(str(bounded.socket))
            peers.append(sock)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(HEAD + b"x" * PAD)
        # Then each finishes its line: the lines the server still holds are answered.
        outcomes, refusals = [], []
        for sock in peers:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(TAIL)
            reply = _reply(sock)
            outcomes.append(_outcome(reply))
            if reply is not None and isinstance(reply.get("error"), dict):
                refusals.append(reply["error"])
    finally:
        for sock in peers:
            sock.close()
    assert sorted(outcomes) == ["served"] * 4 + ["too-many-buffered-bytes"] * 2, outcomes
    for error in refusals:
        assert isinstance(error, dict)
        assert error["data"]["limit"] == LIMIT
        assert "server_max_buffered_bytes" in error["message"]
    # What the closed connections held was given back: a new peer's large line fits again.
    with socket.socket(socket.AF_UNIX) as late:
        late.settimeout(START_BOUND)
        late.connect(str(bounded.socket))
        late.sendall(HEAD + b"x" * PAD + TAIL)
        assert _outcome(_reply(late)) == "served"
