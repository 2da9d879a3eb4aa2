"""Requests on a real ``membrane serve``, each in a task of its own: one that waits keeps its
task (its cancel scopes and task groups across the wait), the calls behind it on the same
connection are answered meanwhile, and each call has a context of its own."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import START_BOUND, clean_env, register, serve, stop

EXTENSION = """\
import contextvars

import anyio

from membrane.tools import Tool

GATES = {}
MARK = contextvars.ContextVar("mark", default=None)


async def wait(arguments, context):
    # A task group and a cancel scope held across the wait: both must leave in the task
    # that entered them.
    async with anyio.create_task_group() as group:
        group.start_soon(anyio.sleep, 0)
        with anyio.move_on_after(3600):
            await GATES.setdefault(arguments["gate"], anyio.Event()).wait()
    return "opened"


async def open_gate(arguments, context):
    GATES.setdefault(arguments["gate"], anyio.Event()).set()
    return "open"


async def mark(arguments, context):
    before = MARK.get()
    MARK.set(arguments.get("value"))
    return before


async def noop(arguments, context):
    return None


def setup(ext):
    for name, handler in (("wait", wait), ("open", open_gate), ("mark", mark), ("noop", noop)):
        ext.register_tool(Tool(name, name, {"type": "object"}, handler))
"""

CONFIG = '[roles.external]\nallow = ["wait", "open", "mark", "noop"]\n'


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    base = tmp_path_factory.mktemp("eager")
    home, project = base / "home", base / "project"
    (project / ".membrane" / "extensions").mkdir(parents=True)
    home.mkdir()
    (project / ".membrane" / "extensions" / "gate.py").write_text(EXTENSION)
    (project / ".membrane" / "config.toml").write_text(CONFIG)
    sock = base / "sock" / "m.sock"
    proc = serve(sock, home, env=clean_env(home))
    try:
        register(sock, home, project)
        yield sock, project
    finally:
        assert stop(proc) == 0


class _Conn:
    def __init__(self, path: Path, project: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(START_BOUND)
        self.sock.connect(str(path))
        self._buffer = b""
        self.send(0, "initialize", {})
        self.project = self.reply()["result"]
        self.send(0, "projects/add", {"root": str(project)})
        self.project_id = self.reply()["result"]["projectId"]

    def send(self, id: int, method: str, params: dict[str, object]) -> None:
        frame = {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
        self.sock.sendall(json.dumps(frame).encode() + b"\n")

    def call(self, id: int, name: str, arguments: dict[str, object] | None = None) -> bytes:
        params = {"projectId": self.project_id, "name": name, "arguments": arguments or {}}
        frame = {"jsonrpc": "2.0", "id": id, "method": "actions/call", "params": params}
        return json.dumps(frame).encode() + b"\n"

    def reply(self) -> dict[str, object]:
        while b"\n" not in self._buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(self._buffer)
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        reply = json.loads(line)
        assert isinstance(reply, dict)
        return reply


def _result(reply: dict[str, object]) -> object:
    assert "error" not in reply, reply
    result = reply["result"]
    assert isinstance(result, dict)
    return result["result"]


def test_a_waiting_call_keeps_its_task_while_the_calls_behind_it_are_answered(
    served: tuple[Path, Path],
) -> None:
    conn = _Conn(*served)
    # One write: the waiting call first, then a no-op and the call that ends the wait.
    gate = {"gate": "behind"}
    conn.sock.sendall(
        conn.call(1, "wait", gate) + conn.call(2, "noop") + conn.call(3, "open", gate)
    )
    replies = [conn.reply() for _ in range(3)]
    assert [reply["id"] for reply in replies] == [2, 3, 1]
    assert [_result(reply) for reply in replies] == [None, "open", "opened"]
    conn.sock.close()


def test_each_call_has_a_context_of_its_own(served: tuple[Path, Path]) -> None:
    conn = _Conn(*served)
    conn.sock.sendall(conn.call(1, "mark", {"value": "first"}))
    assert _result(conn.reply()) is None
    conn.sock.sendall(conn.call(2, "mark", {"value": "second"}))
    assert _result(conn.reply()) is None  # nothing the first call set is seen by the next
    conn.sock.close()


def test_a_burst_of_calls_in_one_write_is_answered_in_full(served: tuple[Path, Path]) -> None:
    conn = _Conn(*served)
    conn.sock.sendall(b"".join(conn.call(i, "noop") for i in range(1, 501)))
    replies = [conn.reply() for _ in range(500)]
    assert sorted(int(str(reply["id"])) for reply in replies) == list(range(1, 501))
    assert all(_result(reply) is None for reply in replies)
    conn.sock.close()


def test_a_call_left_waiting_by_a_closed_connection_holds_up_no_one(
    served: tuple[Path, Path],
) -> None:
    gone = _Conn(*served)
    gone.sock.sendall(gone.call(1, "wait", {"gate": "never"}))
    gone.sock.close()
    conn = _Conn(*served)
    conn.sock.sendall(conn.call(7, "noop"))
    reply = conn.reply()
    assert reply["id"] == 7 and _result(reply) is None
    conn.sock.close()
