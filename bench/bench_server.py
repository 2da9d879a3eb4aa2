"""The machine runtime's call path: a no-op ``actions/call`` over the socket, from a separate
client process, at concurrency 1 and 16 (calls/s, p50, p99).

Side by side in the same run:

* the limit: a raw NDJSON echo server over a Unix socket in Python (asyncio streams), same
  framing, same client; it does nothing but send each line back;
* the peer: the official MCP Python SDK server (``MCPServer``) over stdio with a no-op tool,
  called with ``tools/call`` after the MCP handshake.

The socket client is the same for Membrane and the echo: a lean ``epoll`` loop over
non-blocking sockets, every request frame encoded before the clock starts, every reply parsed
and checked (its id, no error). At concurrency c it keeps c connections busy, one request in
flight on each. It costs about as much per call as the echo server itself, so that the echo's
figure is the echo's and not the client's (an asyncio client costs several times more per
call than the echo and would cap both servers at its own speed). With ``--clients 2`` (the
default on three cores or more) two client processes share the c connections. The MCP peer
gets the same lean client (frames encoded first, replies parsed and checked, over its stdio
pipes instead of a socket) and the same number of calls; it keeps c calls in flight on its one
stdio channel.

Each server is warmed up first; then ``--rounds`` rounds run every server in turn, the order
turning each round, and the figures are the medians over the rounds. The servers' CPU time
per call (from ``/proc``) and the load average are printed as well.
Goals at concurrency 16: at least 0.5x the raw echo and at least 5x the MCP SDK, in calls/s.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Calls per round at each concurrency, the same for every server.
CALLS = {1: 2000, 16: 6000}
WARMUP = 1000

EXTENSION = """\
from membrane.tools import Tool


async def noop(arguments, context):
    return None


def setup(ext):
    ext.register_tool(Tool("noop", "Does nothing.", {"type": "object"}, noop))
"""

ECHO = """\
import asyncio, sys


async def serve(reader, writer):
    while line := await reader.readline():
        writer.write(line)
        await writer.drain()


async def main():
    server = await asyncio.start_unix_server(serve, path=sys.argv[1], limit=1 << 20)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
"""

MCP_SERVER = """\
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def noop() -> str:
    return ""


server.run("stdio")
"""

Stats = dict[str, float]


def _stats(latencies: list[float], seconds: float) -> Stats:
    ordered = sorted(latencies)
    return {
        "calls_per_s": len(ordered) / seconds,
        "p50_us": statistics.median(ordered) * 1e6,
        "p99_us": ordered[max(int(len(ordered) * 0.99) - 1, 0)] * 1e6,
    }


def _connect(path: str, *, membrane: bool, root: str) -> tuple[socket.socket, str]:
    """One connection; Membrane's is initialized and has the project added."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    project = ""
    if membrane:
        with sock.makefile("rb") as replies:
            for frame in (
                {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}},
                {"jsonrpc": "2.0", "id": 0, "method": "projects/add", "params": {"root": root}},
            ):
                sock.sendall(json.dumps(frame).encode() + b"\n")
                reply = json.loads(replies.readline())
                project = reply["result"].get("projectId", project)
    return sock, project


def _register(path: str, home: Path, root: str) -> None:
    """Open the project as the owner (with the token the server made in ``home``), so that
    the clients, which present no token, may reach it under the ``external`` role."""
    owner = (home / "owner.token").read_text().strip()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock, sock.makefile("rb") as replies:
        sock.connect(path)
        for frame in (
            {"jsonrpc": "2.0", "id": 0, "method": "initialize",
             "params": {"identity": {"ownerToken": owner}}},
            {"jsonrpc": "2.0", "id": 0, "method": "projects/add", "params": {"root": root}},
        ):  # fmt: skip
            sock.sendall(json.dumps(frame).encode() + b"\n")
            assert "result" in json.loads(replies.readline())


class _Conn:
    """One client connection: its frames, replies so far, unread bytes, when its call began."""

    __slots__ = ("began", "done", "frames", "sock", "unread")

    def __init__(self, sock: socket.socket, frames: list[bytes]) -> None:
        self.sock = sock
        self.frames = frames
        self.done = 0
        self.unread = b""
        self.began = 0.0


def _socket_client(path: str, conns: int, calls: int, *, membrane: bool, root: str) -> Stats:
    """``calls`` no-op calls over ``conns`` connections, one in flight on each."""
    socks = [_connect(path, membrane=membrane, root=root) for _ in range(conns)]
    per = calls // conns
    frames = [
        [
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": i + 1,
                    "method": "actions/call",
                    "params": {"projectId": project, "name": "noop", "arguments": {}},
                }
            ).encode()
            + b"\n"
            for i in range(per)
        ]
        for _, project in socks
    ]
    poller = select.epoll()
    state: dict[int, _Conn] = {}
    for (sock, _), mine in zip(socks, frames, strict=True):
        sock.setblocking(False)
        poller.register(sock.fileno(), select.EPOLLIN)
        state[sock.fileno()] = _Conn(sock, mine)
    _ready()
    latencies: list[float] = []
    clock = time.perf_counter
    began = clock()
    for conn in state.values():
        conn.began = clock()
        conn.sock.send(conn.frames[0])
    live = len(state)
    while live:
        for fd, _ in poller.poll():
            conn = state[fd]
            data = conn.sock.recv(1 << 16)
            if not data:
                raise SystemExit("the server closed a connection")
            buffer = conn.unread + data
            while (end := buffer.find(b"\n")) >= 0:
                line, buffer = buffer[:end], buffer[end + 1 :]
                latencies.append(clock() - conn.began)
                reply = json.loads(line)
                done = conn.done = conn.done + 1
                assert reply["id"] == done and "error" not in reply, reply
                if done < per:
                    conn.began = clock()
                    conn.sock.send(conn.frames[done])
                else:
                    live -= 1
            conn.unread = buffer
    seconds = clock() - began
    for sock, _ in socks:
        sock.close()
    return _stats(latencies, seconds)


def _mcp_client(script: str, conc: int, calls: int) -> Stats:
    """``calls`` no-op ``tools/call`` requests to the MCP SDK server over its stdio, ``conc``
    in flight on its one channel: the same lean client as the sockets' (every frame encoded
    before the clock starts, every reply parsed and checked), after the MCP handshake."""
    from mcp.types import LATEST_PROTOCOL_VERSION

    server = subprocess.Popen(
        [sys.executable, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
    )
    assert server.stdin is not None and server.stdout is not None
    out, source = server.stdin, server.stdout.fileno()
    hello = {
        "protocolVersion": LATEST_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    }
    out.write(
        json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}).encode()
        + b"\n"
    )
    unread = b""
    while b"\n" not in unread:
        unread += os.read(source, 1 << 16)
    unread = unread[unread.index(b"\n") + 1 :]
    out.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    frames = [
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": i + 1,
                "method": "tools/call",
                "params": {"name": "noop", "arguments": {}},
            }
        ).encode()
        + b"\n"
        for i in range(calls)
    ]
    began_at = [0.0] * (calls + 1)
    latencies: list[float] = []
    clock = time.perf_counter
    _ready()
    began = clock()
    sent = min(conc, calls)
    for i in range(sent):
        began_at[i + 1] = clock()
        out.write(frames[i])
    done = 0
    while done < calls:
        data = os.read(source, 1 << 16)
        if not data:
            raise SystemExit("the MCP server closed its output")
        buffer = unread + data
        while (end := buffer.find(b"\n")) >= 0:
            line, buffer = buffer[:end], buffer[end + 1 :]
            reply = json.loads(line)
            if "id" not in reply:
                continue  # a notification
            latencies.append(clock() - began_at[reply["id"]])
            assert "error" not in reply and not reply["result"].get("isError"), reply
            done += 1
            if sent < calls:
                sent += 1
                began_at[sent] = clock()
                out.write(frames[sent - 1])
        unread = buffer
    seconds = clock() - began
    out.close()
    server.wait(timeout=30)
    return _stats(latencies, seconds)


def _ready() -> None:
    """Tell the parent this client is connected, and wait for its go."""
    print("ready", flush=True)
    sys.stdin.readline()


def _clients(kind: str, target: str, conc: int, calls: int, clients: int, root: str) -> Stats:
    """One measurement by ``clients`` client processes started together (``conc`` connections
    and ``calls`` calls shared among them); their rates add up, their latencies merge."""
    share = max(conc // clients, 1)
    command = [sys.executable, __file__, "--client", kind, target, str(share)]
    procs = [
        subprocess.Popen(
            [*command, str(calls // clients), root],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(min(clients, conc))
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"a {kind} client failed (exit {proc.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return {
        "calls_per_s": sum(r["calls_per_s"] for r in results),
        "p50_us": statistics.median(r["p50_us"] for r in results),
        "p99_us": max(r["p99_us"] for r in results),
    }


def _client_main(kind: str, target: str, conc: int, calls: int, root: str) -> None:
    if kind == "mcp":
        stats = _mcp_client(target, conc, calls)
    else:
        stats = _socket_client(target, conc, calls, membrane=kind == "membrane", root=root)
    print(json.dumps(stats))


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` (0 where ``/proc`` is not there)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _median(rounds: list[Stats]) -> Stats:
    return {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}


def _line(kind: str, conc: int, stats: Stats) -> None:
    print(
        f"{kind:9s} c={conc:<2d} {stats['calls_per_s']:10.0f} calls/s  "
        f"p50 {stats['p50_us']:8.0f} us  p99 {stats['p99_us']:8.0f} us"
    )


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=2 if (os.cpu_count() or 1) >= 3 else 1)
    args = parser.parse_args()
    print(f"load average at start: {_load()} ({os.cpu_count()} cores, {args.clients} client(s))")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        home, project = base / "home", base / "project"
        (project / ".membrane" / "extensions").mkdir(parents=True)
        home.mkdir()
        (project / ".membrane" / "extensions" / "noop.py").write_text(EXTENSION)
        (project / ".membrane" / "config.toml").write_text('[roles.external]\nallow = ["noop"]\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMBRANE_")}
        env["MEMBRANE_HOME"] = str(home)
        sock = base / "sock" / "m.sock"
        server = subprocess.Popen(
            [sys.executable, "-m", "membrane", "serve", "--socket", str(sock)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert server.stderr is not None
        assert "listening on" in server.stderr.readline()
        _register(str(sock), home, str(project))
        echo_path = base / "echo.sock"
        echo = subprocess.Popen(
            [sys.executable, "-c", ECHO, str(echo_path)], stdout=subprocess.PIPE, text=True
        )
        assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
        mcp_script = base / "mcp_server.py"
        mcp_script.write_text(MCP_SERVER)
        targets = {
            "membrane": (str(sock), server.pid, str(project)),
            "echo": (str(echo_path), echo.pid, ""),
            "mcp": (str(mcp_script), 0, ""),
        }
        results: dict[tuple[str, int], Stats] = {}
        ratios: dict[int, list[float]] = {}
        cpu: dict[tuple[str, int], float] = {}
        try:
            for kind, (target, _, root) in targets.items():
                _clients(kind, target, 16, WARMUP, args.clients, root)
            for conc in (1, 16):
                rounds: dict[str, list[Stats]] = {kind: [] for kind in targets}
                spent = dict.fromkeys(targets, 0.0)
                for n in range(args.rounds):
                    # Every side in every round, the order turning, the same calls each.
                    order = list(targets)[n % 3 :] + list(targets)[: n % 3]
                    for kind in order:
                        target, pid, root = targets[kind]
                        before = _cpu_seconds(pid) if pid else 0.0
                        clients = 1 if kind == "mcp" else args.clients  # stdio: one channel
                        stats = _clients(kind, target, conc, CALLS[conc], clients, root)
                        spent[kind] += (_cpu_seconds(pid) - before) if pid else 0.0
                        rounds[kind].append(stats)
                    ratios[conc] = [
                        m["calls_per_s"] / e["calls_per_s"]
                        for m, e in zip(rounds["membrane"], rounds["echo"], strict=True)
                    ]
                for kind in targets:
                    results[kind, conc] = _median(rounds[kind])
                    cpu[kind, conc] = spent[kind] / (args.rounds * CALLS[conc]) * 1e6
                results["mcp-sdk", conc] = results.pop(("mcp", conc))
                for kind in ("membrane", "echo", "mcp-sdk"):
                    _line(kind, conc, results[kind, conc])
                print(
                    f"server cpu per call c={conc}: membrane {cpu['membrane', conc]:.0f} us, "
                    f"echo {cpu['echo', conc]:.0f} us; membrane/echo per round: "
                    + " ".join(f"{r:.2f}" for r in ratios[conc])
                )
        finally:
            server.terminate()
            echo.terminate()
            server.wait()
            echo.wait()
    print(f"load average at end: {_load()}")
    for conc in (1, 16):
        vs_echo = statistics.median(ratios[conc])
        vs_mcp = results["membrane", conc]["calls_per_s"] / results["mcp-sdk", conc]["calls_per_s"]
        if conc == 16:
            print(
                f"goal actions/call vs raw NDJSON echo (c=16): >= 0.5x, measured {vs_echo:.2f}x "
                f"({'met' if vs_echo >= 0.5 else 'missed'})"
            )
            print(
                f"goal actions/call vs MCP SDK no-op tool (c=16): >= 5x, measured {vs_mcp:.2f}x "
                f"({'met' if vs_mcp >= 5 else 'missed'})"
            )
        else:
            print(f"ratio c=1: {vs_echo:.2f}x the raw echo, {vs_mcp:.2f}x the MCP SDK")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        _client_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    else:
        main()
