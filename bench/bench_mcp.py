"""A tool call through Membrane's mounted MCP server against the same call through a bare SDK
``ClientSession`` to the same server process; and ``tools/list_changed`` to the next view.

One server process (``mcp_bench_server.py``, streamable HTTP on loopback) serves both clients
in the same run: Membrane's mount (``McpServers``, the call going through a child's scope and
its view: argument validation, veto, result mapping) and a bare ``mcp.ClientSession``. Calls
alternate in rounds so that both see the same machine load; the ratio of the medians is the
goal (at most 1.2x).

The list_changed latency is the time from the server sending the notice (its own wall clock,
returned by the tool that sent it) to a child's next ``scope.view()`` holding the change: a
figure printed, with no goal (it had a goal line with no target, always met).
"""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from membrane.config.values import McpServerSpec
from membrane.mcp import McpServers
from membrane.tools.registry import RegistryChange, ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import ToolContext

SERVER = Path(__file__).resolve().parent / "mcp_bench_server.py"
ROUNDS = 10
CALLS = 20
CHANGES = 20
GOAL_RATIO = 1.2


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def wait_listening(port: int) -> None:
    with anyio.fail_after(60):
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                await anyio.sleep(0.05)


async def bench(url: str) -> tuple[float, float, float]:
    registry = ToolRegistry()
    spec = McpServerSpec("bench", url=url)
    context = ToolContext()
    with tempfile.TemporaryDirectory() as logs:
        async with (
            McpServers({"bench": spec}, registry, log_dir=Path(logs)) as servers,
            streamable_http_client(url) as (read, write),
            ClientSession(read, write) as bare,
        ):
            await bare.initialize()
            await bare.list_tools()
            assert not await servers.ensure(["bench"])
            scope = Scope(registry, name="agent:bench")

            async def through_membrane() -> None:
                result = await scope.view().call("mcp__bench__echo", {"text": "hi"}, context)
                assert getattr(result, "text", None) == "hi", result

            async def through_bare() -> None:
                result = await bare.call_tool("echo", {"text": "hi"})
                assert not result.is_error

            for call in (through_membrane, through_bare):  # warm both paths
                for _ in range(3):
                    await call()
            mounted: list[float] = []
            direct: list[float] = []
            for _ in range(ROUNDS):
                for call, times in ((through_membrane, mounted), (through_bare, direct)):
                    for _ in range(CALLS):
                        start = time.perf_counter()
                        await call()
                        times.append(time.perf_counter() - start)

            seen: dict[str, float] = {}

            def heard(change: RegistryChange) -> None:
                seen[f"{change.kind}:{change.name}"] = time.time()

            unsubscribe = registry.subscribe(heard)
            latencies: list[float] = []
            for i in range(CHANGES):
                full = f"mcp__bench__late{i}"
                for action, kind in (("add", "registered"), ("remove", "removed")):
                    result = await scope.view().call(
                        f"mcp__bench__{action}", {"name": f"late{i}"}, context
                    )
                    sent = float(str(getattr(result, "text", "")))
                    present = full in scope.view()  # the child's next view
                    assert present == (action == "add"), (action, full)
                    latencies.append(seen[f"{kind}:{full}"] - sent)
            unsubscribe()
    return (
        statistics.median(mounted),
        statistics.median(direct),
        statistics.median(latencies),
    )


def main() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        anyio.run(wait_listening, port)
        mounted, direct, latency = anyio.run(bench, f"http://127.0.0.1:{port}/mcp")
    finally:
        process.terminate()
        process.wait(timeout=10)
    ratio = mounted / direct
    print(f"mcp: one server process on streamable HTTP, {ROUNDS * CALLS} calls per client")
    print(f"  bare ClientSession call     {direct * 1e3:8.2f} ms")
    print(f"  through Membrane's mount    {mounted * 1e3:8.2f} ms")
    print(f"  list_changed to next view   {latency * 1e3:8.2f} ms (median of {CHANGES})")
    verdict = "met" if ratio <= GOAL_RATIO else "missed"
    print(
        f"goal tool call through the mounted server vs a bare ClientSession: at most "
        f"{GOAL_RATIO}x, measured {ratio:.2f}x ({verdict})"
    )


if __name__ == "__main__":
    main()
