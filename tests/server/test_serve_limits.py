"""What one peer may hold in a real ``membrane serve`` is bounded by settings, each limit with
its error code: connections in all and per peer process (``too-many-connections``, then the
connection is closed), ``runs/wait`` calls in flight per connection (``too-many-waits``), and
the replies kept for ``actions/call`` request ids by their bytes (the oldest leave first)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, Running, make_project, owner, serve, stop

from membrane.errors import MembraneError
from membrane.server import Client

pytestmark = pytest.mark.anyio

LIMITS = """\
server_max_connections = 3
server_max_connections_per_peer = 2
server_max_waits_per_connection = 2
server_reply_cache_bytes = 4000
"""

# Another peer process: one connection, initialized; it says what it was answered, then holds.
HOLDER = textwrap.dedent(
    """
    import json, socket, sys
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(sys.argv[1])
    sock.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}\\n')
    data = b""
    while not data.endswith(b"\\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    print(json.dumps(json.loads(data or b"null")), flush=True)
    sys.stdin.read()
    """
)


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[Running]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(LIMITS)
    project = make_project(tmp_path / "project")
    socket_path = tmp_path / "sock" / "m.sock"
    proc = serve(socket_path, home)
    try:
        yield Running(socket=socket_path, home=home, project=project, pid=proc.pid)
    finally:
        stop(proc)


def _initialized(path: Path) -> tuple[socket.socket, dict[str, object]]:
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(START_BOUND)
    sock.connect(str(path))
    sock.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}\n')
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return sock, json.loads(data)


def _holder(path: Path) -> tuple[subprocess.Popen[str], dict[str, object]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def _code(reply: dict[str, object]) -> str:
    error = reply.get("error")
    assert isinstance(error, dict), reply
    return str(error["data"]["code"])  # type: ignore[index]


def test_connections_are_bounded_per_peer_process_and_in_all(limited: Running) -> None:
    first, reply = _initialized(limited.socket)
    second, again = _initialized(limited.socket)
    holders = []
    try:
        assert "result" in reply and "result" in again
        # A third from this process is one too many for a peer.
        third, refused = _initialized(limited.socket)
        third.close()
        assert _code(refused) == "too-many-connections"
        assert refused["error"]["data"]["scope"] == "peer"  # type: ignore[index]
        # Another process gets the third connection; a fourth process is one too many in all.
        holder, held = _holder(limited.socket)
        holders.append(holder)
        assert "result" in held
        late, crowded = _holder(limited.socket)
        holders.append(late)
        assert _code(crowded) == "too-many-connections"
        assert crowded["error"]["data"]["scope"] == "total"  # type: ignore[index]
    finally:
        first.close()
        second.close()
        for proc in holders:
            proc.kill()
            proc.wait()
    # Closed connections are counted out: this process may connect again, once the server
    # has seen them end (it counts a connection out as it finishes closing it).
    deadline = time.monotonic() + START_BOUND
    while True:
        fresh, reply = _initialized(limited.socket)
        fresh.close()
        if "result" in reply or time.monotonic() > deadline:
            break
    assert "result" in reply


async def test_runs_wait_calls_in_flight_are_bounded_per_connection(
    limited: Running, tmp_path: Path
) -> None:
    script = tmp_path / "script.json"
    sleeper = {"tool_calls": [{"name": "Bash", "arguments": {"command": "sleep 600"}}]}
    script.write_text(json.dumps({"agents": {"reader": [sleeper, {"text": "done"}]}}))
    with anyio.fail_after(START_BOUND * 2):
        async with Client.connect(limited.socket) as client:
            await client.request("initialize", {"identity": owner(limited.home)})
            added = await client.request("projects/add", {"root": str(limited.project)})
            ids = {"projectId": added["projectId"]}
            start = {**ids, "agent": "reader", "task": "wait", "model": f"scripted:{script}"}
            run = {**ids, "runId": (await client.request("runs/start", start))["run"]["run_id"]}
            ended: list[str] = []
            async with anyio.create_task_group() as group:

                async def wait() -> None:
                    ended.append((await client.request("runs/wait", run))["run"]["status"])

                for _ in range(2):
                    group.start_soon(wait)
                # Both are in flight once a later call on the connection has been answered.
                await client.request("runs/get", run)
                with pytest.raises(MembraneError) as refused:
                    await client.request("runs/wait", run)
                assert refused.value.code == "too-many-waits"
                # The limit is the connection's: another one may wait.
                async with Client.connect(limited.socket) as other:
                    await other.request("initialize", {"identity": owner(limited.home)})
                    await client.request("runs/stop", run)
                    assert (await other.request("runs/wait", run))["run"]["status"] == "stopped"
            assert ended == ["stopped", "stopped"]


async def test_the_replies_kept_for_request_ids_are_bounded_by_bytes(limited: Running) -> None:
    page = limited.project / "page.txt"
    page.write_text("first " * 150)  # about 1 KB a reply, 4000 bytes kept
    with anyio.fail_after(START_BOUND):
        async with Client.connect(limited.socket) as client:
            await client.request("initialize", {"identity": owner(limited.home)})
            added = await client.request("projects/add", {"root": str(limited.project)})
            read = {
                "projectId": added["projectId"],
                "name": "Read",
                "arguments": {"file_path": "page.txt"},
            }

            async def call(request_id: str) -> str:
                reply = await client.request("actions/call", {**read, "requestId": request_id})
                return str(reply["result"])

            for n in range(8):
                assert "first" in await call(f"r-{n}")
            page.write_text("second " * 150)
            # The newest replies are kept: a retry gets the same answer, not a new read.
            assert "first" in await call("r-7")
            # The oldest left to keep the bytes bounded: its retry reads again.
            assert "second" in await call("r-0")
