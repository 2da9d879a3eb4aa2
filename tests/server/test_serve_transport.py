"""The socket of a real ``membrane serve``: modes, framing, stalls, crowds, races and crashes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, Running, launch, make_project, owner, serve, stop

from membrane.errors import CallerRefused, RuntimeUnavailable
from membrane.server import Client
from membrane.server.transport import probe_socket

pytestmark = pytest.mark.anyio


def _raw(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(START_BOUND)
    sock.connect(str(path))
    return sock


def _line(sock: socket.socket) -> dict[str, object]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError(data)
        data += chunk
    reply = json.loads(data)
    assert isinstance(reply, dict)
    return reply


def _frame(method: str, params: dict[str, object], id: int = 1) -> bytes:
    return (
        json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).encode()
        + b"\n"
    )


async def _add(client: Client, root: Path) -> dict[str, str]:
    reply = await client.request("projects/add", {"root": str(root)})
    return {"projectId": reply["projectId"]}


async def test_initialize_reports_the_runtime_and_the_caller(runtime: Running) -> None:
    with anyio.fail_after(START_BOUND):
        async with Client.connect(runtime.socket) as client:
            reply = await client.request("initialize", {"clientInfo": {"name": "test"}})
    info = reply["runtimeInfo"]
    assert info["pid"] == runtime.pid
    assert info["socketPath"] == str(runtime.socket)
    assert info["defaultRole"] == "external"
    assert info["projectRoot"] is None  # a machine runtime: each projects/add names its root
    assert len(info["buildHash"]) == 64 and info["version"]
    assert reply["capabilities"] == {
        "actions": {"listChanged": True},
        "approval": {"request": True},
    }
    assert reply["caller"] == {
        "role": "external",
        "sessionId": None,
        "runId": None,
        "owner": False,
    }


def test_the_socket_is_0600_in_a_0700_folder(runtime: Running) -> None:
    assert stat.S_IMODE(runtime.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(runtime.socket.parent.stat().st_mode) == 0o700
    assert stat.S_ISSOCK(runtime.socket.stat().st_mode)


def test_malformed_json_gets_a_parse_error_and_the_connection_lives(runtime: Running) -> None:
    with _raw(runtime.socket) as sock:
        sock.sendall(b"{not json\n")
        assert _line(sock)["error"]["code"] == -32700  # type: ignore[index]
        sock.sendall(b'{"jsonrpc": "2.0", "id": 7, "method": 5}\n')
        assert _line(sock)["error"]["code"] == -32600  # type: ignore[index]
        sock.sendall(_frame("no/such", {}, id=8))
        assert _line(sock)["error"]["code"] == -32601  # type: ignore[index]
        sock.sendall(_frame("initialize", {"clientInfo": "not an object"}, id=9))
        assert _line(sock)["error"]["code"] == -32602  # type: ignore[index]
        sock.sendall(_frame("initialize", {}, id=10))
        reply = _line(sock)
        assert reply["id"] == 10 and "runtimeInfo" in reply["result"]  # type: ignore[operator]


def test_a_deeply_nested_frame_gets_a_parse_error_and_the_connection_lives(
    runtime: Running,
) -> None:
    def nested(depth: int) -> bytes:
        head = (
            b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"clientInfo": {"x": '
        )
        return head + b"[" * depth + b"]" * depth + b"}}}\n"

    with _raw(runtime.socket) as sock:
        sock.sendall(nested(200_000))
        reply = _line(sock)
        assert reply["id"] is None
        assert reply["error"]["code"] == -32700  # type: ignore[index]
        assert "deeper than" in reply["error"]["message"]  # type: ignore[index]
        sock.sendall(nested(100))  # a frame nesting within the limit is read
        assert "runtimeInfo" in _line(sock)["result"]  # type: ignore[operator]


def test_a_2_mib_frame_is_refused_and_the_connection_closed(runtime: Running) -> None:
    with _raw(runtime.socket) as sock:
        payload = (
            b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"x": "'
            + b"a" * (2 << 20)
        )
        with pytest.raises(OSError):  # the server may close while we are still sending
            sock.sendall(payload + b'"}}\n')
            reply = _line(sock)
            assert reply["error"]["data"]["code"] == "protocol-error"  # type: ignore[index]
            assert sock.recv(1) == b""
            raise OSError("closed")


def test_a_frame_just_under_the_limit_is_read(runtime: Running) -> None:
    with _raw(runtime.socket) as sock:
        head = (
            b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"clientInfo": {"x": "'
        )
        tail = b'"}}}'
        body = head + b"a" * ((1 << 20) - len(head) - len(tail)) + tail
        assert len(body) == 1 << 20
        sock.sendall(body + b"\n")
        assert "runtimeInfo" in _line(sock)["result"]  # type: ignore[operator]


async def test_a_stalled_half_line_delays_nobody(runtime: Running) -> None:
    with _raw(runtime.socket) as stalled:
        stalled.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "initia')
        with anyio.fail_after(START_BOUND):
            async with Client.connect(runtime.socket) as client:
                await client.request("initialize", {})
                project = await _add(client, runtime.project)
                listed = await client.request("actions/list", project)
        assert [a["name"] for a in listed["actions"]] == ["Glob", "Grep", "Read"]
        stalled.sendall(b'lize", "params": {}}\n')
        assert "runtimeInfo" in _line(stalled)["result"]  # type: ignore[operator]


async def test_two_hundred_concurrent_clients_are_all_answered(runtime: Running) -> None:
    answers: list[str] = []

    async def one(index: int) -> None:
        async with Client.connect(runtime.socket) as client:
            await client.request("initialize", {"clientInfo": {"name": f"c{index}"}})
            project = await _add(client, runtime.project)
            reply = await client.request(
                "actions/call",
                {**project, "name": "Read", "arguments": {"file_path": "notes.txt"}},
            )
            answers.append(reply["result"])

    with anyio.fail_after(START_BOUND * 2):
        async with anyio.create_task_group() as group:
            for index in range(200):
                group.start_soon(one, index)
    assert len(answers) == 200
    assert all("alpha" in answer for answer in answers)


def test_another_uid_is_refused_by_its_peer_credentials(runtime: Running, tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("dropping to another uid needs root (CI runs as root)")
    script = (
        "import json, os, socket, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX); s.settimeout(60); s.connect(sys.argv[1])\n"
        's.sendall(b\'{"jsonrpc": "2.0", "id": 1, "method": "initialize"}\\n\')\n'
        "data = b''\n"
        "while True:\n"
        "    chunk = s.recv(65536)\n"
        "    if not chunk: break\n"
        "    data += chunk\n"
        "print(os.getuid(), data.decode())\n"
    )
    # Give another user a way to the socket (a hard link in a folder it may enter, the inode
    # opened to everyone), so that only the peer-credential check stands in the way.
    door = Path(tempfile.mkdtemp())
    os.chmod(door, 0o711)
    link = door / "m.sock"
    os.link(runtime.socket, link)
    os.chmod(link, 0o666)
    try:
        done = subprocess.run(
            [sys.executable, "-c", script, str(link)],
            capture_output=True,
            text=True,
            timeout=START_BOUND,
            check=False,
        )
    finally:
        os.chmod(runtime.socket, 0o600)
        link.unlink()
        door.rmdir()
    assert done.returncode == 0, done.stderr
    uid, _, data = done.stdout.partition(" ")
    assert uid == "65534"
    replies = [json.loads(line) for line in data.splitlines() if line.strip()]
    assert len(replies) == 1  # the refusal, then the connection was closed unanswered
    assert replies[0]["error"]["data"]["code"] == CallerRefused.code
    assert replies[0]["id"] is None


def test_two_servers_racing_for_one_socket_exactly_one_binds(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    socket_path = tmp_path / "sock" / "m.sock"
    first, second = launch(socket_path, home), launch(socket_path, home)
    try:
        results = {}
        for proc in (first, second):
            assert proc.stderr is not None
            results[proc.pid] = proc.stderr.readline()
        winners = [pid for pid, line in results.items() if "listening on" in line]
        assert len(winners) == 1
        loser = second if winners[0] == first.pid else first
        assert loser.wait(timeout=START_BOUND) == 3
        assert loser.stderr is not None
        message = results[loser.pid] + loser.stderr.read()
        assert "runtime-already-running" in message
        assert f"pid {winners[0]}" in message
        # The live socket survived the loser.
        with _raw(socket_path) as sock:
            sock.sendall(_frame("initialize", {}))
            assert _line(sock)["result"]["runtimeInfo"]["pid"] == winners[0]  # type: ignore[index]
    finally:
        stop(first)
        stop(second)
    assert not socket_path.exists()


def test_a_second_serve_on_a_live_socket_names_the_pid(runtime: Running) -> None:
    proc = launch(runtime.socket, runtime.home)
    assert proc.wait(timeout=START_BOUND) == 3
    assert proc.stderr is not None
    message = proc.stderr.read()
    assert "runtime-already-running" in message and f"pid {runtime.pid}" in message
    assert runtime.socket.exists()


async def test_kill_9_leaves_a_stale_socket_that_the_next_serve_cleans(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = make_project(tmp_path / "project")
    socket_path = tmp_path / "sock" / "m.sock"
    script = tmp_path / "script.yaml"
    script.write_text("agents:\n  reader:\n    - text: read it all\n")
    start = {
        "agent": "reader",
        "task": "read notes.txt",
        "requestId": "once-only",
        "model": f"scripted:{script}",
    }
    proc = serve(socket_path, home)
    try:
        with anyio.fail_after(START_BOUND):
            async with Client.connect(socket_path) as client:
                await client.request("initialize", {"identity": owner(home)})
                ids = await _add(client, project)
                first = (await client.request("runs/start", {**ids, **start}))["run"]
                done = (await client.request("runs/wait", {**ids, "runId": first["run_id"]}))["run"]
        assert done["status"] == "completed"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert socket_path.exists()  # what the crash left behind
    with pytest.raises(RuntimeUnavailable):
        async with Client.connect(socket_path):
            pass
    again = serve(socket_path, home)
    try:
        with anyio.fail_after(START_BOUND):
            async with Client.connect(socket_path) as client:
                info = await client.request("initialize", {"identity": owner(home)})
                assert info["runtimeInfo"]["pid"] == again.pid
                ids = await _add(client, project)
                replay = (await client.request("runs/start", {**ids, **start}))["run"]
        # The receipt survived in the project's state: the same run, not a second one.
        assert replay["run_id"] == first["run_id"]
        assert replay["result"]["text"] == "read it all"
    finally:
        stop(again)


async def test_sigterm_drains_a_call_in_flight_then_exits(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    project = make_project(tmp_path / "project")
    # Two FIFOs, so neither side polls: the handler says it started by opening ``started``, and
    # waits on ``gate`` until the test writes to it.
    started, gate = tmp_path / "started", tmp_path / "gate"
    os.mkfifo(started)
    os.mkfifo(gate)
    (project / ".membrane" / "extensions").mkdir()
    (project / ".membrane" / "extensions" / "slow.py").write_text(
        "import anyio\n"
        "from membrane.tools import Tool\n"
        "def _wait():\n"
        f"    with open({str(started)!r}, 'w') as said:\n"
        "        said.write('in')\n"
        f"    with open({str(gate)!r}) as opened:\n"
        "        return opened.read()\n"
        "async def wait(arguments, context):\n"
        "    return await anyio.to_thread.run_sync(_wait)\n"
        "def setup(api):\n"
        "    api.register_tool(\n"
        "        Tool('wait_gate', 'Waits for the gate FIFO.', {'type': 'object'}, wait)\n"
        "    )\n"
    )
    (project / ".membrane" / "config.toml").write_text('[roles.external]\nallow = ["wait_gate"]\n')
    socket_path = tmp_path / "sock" / "m.sock"
    proc = serve(socket_path, home)
    assert proc.stderr is not None
    stderr = proc.stderr

    def draining() -> str:
        # The server says so once its listening socket is closed (or stderr ends).
        line = stderr.readline()
        while line and "draining" not in line:
            line = stderr.readline()
        return line

    try:
        with anyio.fail_after(START_BOUND):
            async with Client.connect(socket_path) as client:
                await client.request("initialize", {"identity": owner(home)})
                ids = await _add(client, project)
                async with anyio.create_task_group() as group:
                    replies: list[object] = []

                    async def call() -> None:
                        replies.append(
                            await client.request("actions/call", {**ids, "name": "wait_gate"})
                        )

                    group.start_soon(call)
                    # The call is in flight once its handler has opened ``started``.
                    said = await anyio.to_thread.run_sync(started.read_text, abandon_on_cancel=True)
                    assert said == "in"
                    proc.send_signal(signal.SIGTERM)
                    line = await anyio.to_thread.run_sync(draining, abandon_on_cancel=True)
                    assert "draining 1 call(s) in flight" in line, line
                    # Draining: a new connection is refused, to a probe and to a client.
                    assert not probe_socket(socket_path)
                    with pytest.raises(RuntimeUnavailable):
                        async with Client.connect(socket_path):
                            pass
                    # A new request on an open connection is not run; the call goes on.
                    with pytest.raises(RuntimeUnavailable) as late:
                        await client.request("actions/list", ids)
                    assert late.value.data.get("shutting_down") is True
                    assert proc.poll() is None
                    await anyio.to_thread.run_sync(gate.write_text, "released")
        assert replies == [{"result": "released"}]
        assert proc.wait(timeout=START_BOUND) == 0
        assert not socket_path.exists()
    finally:
        stop(proc)


@pytest.mark.parametrize("ready", ["a reply", "the end of the stream"])
async def test_leaving_a_client_as_its_socket_turns_readable_reports_nothing_to_the_loop(
    tmp_path: Path, ready: str
) -> None:
    # A caller leaves ``Client.connect`` in the very loop iteration in which the socket turns
    # readable (the server answers, or closes as it drains): the reader's wait is cancelled
    # and its wake-up is due in that same iteration. That wake-up must not set the cancelled
    # wait's future (``InvalidStateError`` raised from a loop callback, which a host's loop
    # reports and anyio's test runner turns into a failure).
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    path = tmp_path / "m.sock"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(str(path))
            listener.listen(1)
            with anyio.fail_after(START_BOUND):
                async with Client.connect(path) as client:
                    # ``connect`` returned, so the connection waits in the backlog.
                    peer, _ = listener.accept()
                    with peer:
                        async with anyio.create_task_group() as group:
                            group.start_soon(client.request, "initialize", {})
                            frame = await anyio.to_thread.run_sync(peer.recv, 65536)
                            reply = {"jsonrpc": "2.0", "id": json.loads(frame)["id"], "result": {}}
                            peer.sendall(json.dumps(reply).encode() + b"\n")
                        # The reply came back, so the reader waits on the socket again.
                        if ready == "a reply":
                            note = {"jsonrpc": "2.0", "method": "events/event", "params": {}}
                            peer.sendall(json.dumps(note).encode() + b"\n")
                        else:
                            peer.shutdown(socket.SHUT_WR)
                        # The next iteration's poll finds the socket readable, and queues
                        # the reader's wake-up behind this task, which then leaves.
                        await asyncio.sleep(0)
            # The queued wake-up has run by now: the exit took more iterations.
            await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert reported == []
