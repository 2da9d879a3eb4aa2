"""The machine runtime's call path: a no-op ``actions/call`` over the socket, from a separate
client process, at concurrency 1 and 16 (calls/s, p50, p99).

Side by side in the same run:

* the limit: a raw NDJSON echo server over a Unix socket in Python (asyncio), same framing,
  same client; it does nothing but send each line back;
* the peer: the official MCP Python SDK server (``MCPServer``) over stdio with a no-op tool,
  called with the SDK's ``ClientSession.call_tool``.

At concurrency c the Membrane and echo clients keep c connections busy, one request in flight
on each; the MCP client keeps c calls in flight on its one stdio session (stdio has one channel).
Goals at concurrency 16: at least 0.5x the raw echo and at least 5x the MCP SDK, in calls/s.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CALLS = {1: 2000, 16: 8000}

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


def _stats(latencies: list[float], seconds: float) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "calls_per_s": len(ordered) / seconds,
        "p50_us": statistics.median(ordered) * 1e6,
        "p99_us": ordered[int(len(ordered) * 0.99) - 1] * 1e6,
    }


async def _socket_client(
    path: str, conc: int, calls: int, *, membrane: bool, root: str
) -> dict[str, float]:
    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
        reader, writer = await asyncio.open_unix_connection(path, limit=1 << 24)
        project = ""
        if membrane:
            for frame in (
                {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}},
                {"jsonrpc": "2.0", "id": 0, "method": "projects/add", "params": {"root": root}},
            ):
                writer.write(json.dumps(frame).encode() + b"\n")
                reply = json.loads(await reader.readline())
                project = reply["result"].get("projectId", project)
        return reader, writer, project

    conns = [await connect() for _ in range(conc)]
    latencies: list[float] = []

    async def worker(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, project: str, n: int
    ) -> None:
        for i in range(n):
            frame = {
                "jsonrpc": "2.0",
                "id": i + 1,
                "method": "actions/call",
                "params": {"projectId": project, "name": "noop", "arguments": {}},
            }
            began = time.perf_counter()
            writer.write(json.dumps(frame).encode() + b"\n")
            reply = json.loads(await reader.readline())
            latencies.append(time.perf_counter() - began)
            assert reply["id"] == i + 1 and "error" not in reply, reply

    began = time.perf_counter()
    await asyncio.gather(*(worker(r, w, p, calls // conc) for r, w, p in conns))
    seconds = time.perf_counter() - began
    for _, writer, _ in conns:
        writer.close()
    return _stats(latencies, seconds)


async def _mcp_client(script: str, conc: int, calls: int) -> dict[str, float]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=[script])
    latencies: list[float] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def worker(n: int) -> None:
            for _ in range(n):
                began = time.perf_counter()
                result = await session.call_tool("noop", {})
                latencies.append(time.perf_counter() - began)
                assert not result.is_error

        began = time.perf_counter()
        await asyncio.gather(*(worker(calls // conc) for _ in range(conc)))
        seconds = time.perf_counter() - began
    return _stats(latencies, seconds)


def _client(kind: str, target: str, conc: int, root: str = "") -> dict[str, float]:
    """Run one measurement in a separate client process."""
    done = subprocess.run(
        [sys.executable, __file__, "--client", kind, target, str(conc), root],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _client_main(kind: str, target: str, conc: int, root: str) -> None:
    calls = CALLS[conc]
    if kind == "mcp":
        stats = asyncio.run(_mcp_client(target, conc, calls))
    else:
        stats = asyncio.run(
            _socket_client(target, conc, calls, membrane=kind == "membrane", root=root)
        )
    print(json.dumps(stats))


def _line(kind: str, conc: int, stats: dict[str, float]) -> None:
    print(
        f"{kind:9s} c={conc:<2d} {stats['calls_per_s']:10.0f} calls/s  "
        f"p50 {stats['p50_us']:8.0f} us  p99 {stats['p99_us']:8.0f} us"
    )


def main() -> None:
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
        echo_path = base / "echo.sock"
        echo = subprocess.Popen(
            [sys.executable, "-c", ECHO, str(echo_path)], stdout=subprocess.PIPE, text=True
        )
        assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
        mcp_script = base / "mcp_server.py"
        mcp_script.write_text(MCP_SERVER)
        results: dict[tuple[str, int], dict[str, float]] = {}
        try:
            for conc in (1, 16):
                results["membrane", conc] = _client("membrane", str(sock), conc, str(project))
                results["echo", conc] = _client("echo", str(echo_path), conc)
                results["mcp-sdk", conc] = _client("mcp", str(mcp_script), conc)
                for kind in ("membrane", "echo", "mcp-sdk"):
                    _line(kind, conc, results[kind, conc])
        finally:
            server.terminate()
            echo.terminate()
            server.wait()
            echo.wait()
    for conc in (1, 16):
        ours = results["membrane", conc]["calls_per_s"]
        vs_echo = ours / results["echo", conc]["calls_per_s"]
        vs_mcp = ours / results["mcp-sdk", conc]["calls_per_s"]
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
        _client_main(
            sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else ""
        )
    else:
        main()
