"""Soak: what a long-lived runtime holds after many runs, in process and in ``membrane serve``.

Two figures per place, read after 1,000 runs and again after 20,000 (the same process, no
restart): the resident set size (``VmRSS``) and the open file descriptors. Goal: each grows by
less than 10% from the first reading to the second, so what the process holds follows its live
runs, not every run it ran (finished runs leave memory; the store keeps them).

* in process: a ``SubagentRuntime`` over a ``SQLiteStore`` file (``synchronous = normal``),
  each run a foreground start of one agent with ``Read``: a tool call, then its answer; the
  store pruned every 100 runs with ``[retention] keep_runs = 1000`` (``SQLiteStore.prune``),
  and its file's size read too: goal, after 20,000 runs at most 1.2x its size after 1,000;
* through the server: ``membrane serve`` in a process of its own, four clients over its socket,
  each starting a run (``runs/start``) and waiting for it (``runs/wait``), the model the
  OpenAI adapter (the ``openai`` SDK) answered by a loopback HTTP server in this process.

A model that records nothing is used in process (the test doubles keep every request they
receive, as a test wants). Run: ``.venv/bin/python bench/bench_soak.py``; ``SOAK_SCALE=0.1``
runs 100 and 2,000.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio

from membrane.config import Retention
from membrane.models.base import ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.server.client import Client
from membrane.store import SQLiteStore
from scaling_support import goal

SCALE = float(os.environ.get("SOAK_SCALE", "1"))
FIRST = max(10, int(1_000 * SCALE))
LAST = max(2 * FIRST, int(20_000 * SCALE))
CLIENTS = 4
#: Runs between two retention passes in process.
PRUNE_EVERY = max(1, FIRST // 10)


def rss_and_fds(pid: int | str = "self") -> tuple[int, int]:
    """The resident set size in bytes and the number of open file descriptors of ``pid``."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def report(place: str, first: tuple[int, int], last: tuple[int, int]) -> None:
    (rss_a, fds_a), (rss_b, fds_b) = first, last
    print(
        f"{place}: after {FIRST:,} runs RSS {rss_a / 2**20:.1f} MiB, {fds_a} fds; "
        f"after {LAST:,} RSS {rss_b / 2**20:.1f} MiB, {fds_b} fds",
        flush=True,
    )
    rss_growth = rss_b / rss_a - 1
    fd_growth = fds_b / fds_a - 1
    goal(
        f"{place} RSS growth {FIRST:,} -> {LAST:,} runs",
        "< 10%",
        f"{rss_growth:+.1%}",
        rss_growth < 0.10,
    )
    goal(
        f"{place} open fds growth {FIRST:,} -> {LAST:,} runs",
        "< 10%",
        f"{fd_growth:+.1%} ({fds_a} -> {fds_b})",
        fd_growth < 0.10,
    )


# -- in process -------------------------------------------------------------------------------


class _Worker:
    """One ``Read`` call, then the answer; keeps nothing."""

    name = "soak"

    async def request(self, request: ModelRequest) -> ModelResponse:
        if len(request.messages) == 1:
            call = ToolCall(id="c1", name="Read", arguments={"path": "a.txt"})
            return ModelResponse(tool_calls=(call,))
        return ModelResponse(text="done")


def state_size(path: Path) -> int:
    """The store file's size once its write-ahead log is checkpointed into it."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return path.stat().st_size


async def in_process(folder: Path) -> None:
    from scaling_support import runtime_for

    path = folder / "state.db"
    store = SQLiteStore(path, synchronous="normal")
    runtime = runtime_for(folder, _Worker(), store=store, concurrency=10)  # type: ignore[arg-type]
    retention = Retention(keep_runs=FIRST)
    readings, sizes = [], []
    async with runtime:
        for i in range(LAST):
            result = await runtime.run(SubagentStartRequest("worker", f"job {i}"))
            assert result.outcome.status == "completed", result.outcome
            if (i + 1) % PRUNE_EVERY == 0:
                await anyio.to_thread.run_sync(store.prune, retention)
            if i + 1 in (FIRST, LAST):
                gc.collect()
                readings.append(rss_and_fds())
                sizes.append(state_size(path))
    store.close()
    report("in process", readings[0], readings[1])
    first, last = sizes
    goal(
        f"state.db size after {LAST:,} runs against {FIRST:,}, retention of the last {FIRST:,}",
        "<= 1.2x",
        f"{last / first:.2f}x ({first / 2**20:.2f} -> {last / 2**20:.2f} MiB)",
        last / first <= 1.2,
    )


# -- through the server -----------------------------------------------------------------------

_COMPLETION = {
    "id": "chatcmpl-soak",
    "object": "chat.completion",
    "created": 0,
    "model": "soak",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "done"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
}


class _Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = json.dumps(_COMPLETION).encode()

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)


async def _client(sock: Path, home: Path, project: Path, count: int, done: list[int]) -> None:
    owner = (home / "owner.token").read_text().strip()
    async with Client.connect(sock) as client:
        await client.request("initialize", {"identity": {"ownerToken": owner}})
        added = await client.request("projects/add", {"root": str(project)})
        start = {"projectId": added["projectId"], "agent": "worker", "model": "soak"}
        for i in range(count):
            run = (await client.request("runs/start", {**start, "task": f"job {i}"}))["run"]
            if run.get("result") is None:
                params = {"projectId": added["projectId"], "runId": run["run_id"]}
                run = (await client.request("runs/wait", params))["run"]
            assert run["status"] == "completed", run
            done[0] += 1


async def _clients(sock: Path, home: Path, project: Path, total: int) -> None:
    done = [0]
    async with anyio.create_task_group() as group:
        for _ in range(CLIENTS):
            group.start_soon(_client, sock, home, project, total // CLIENTS, done)


def through_server(folder: Path) -> None:
    http = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    home, project = folder / "home", folder / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    home.mkdir()
    (agents / "worker.md").write_text(
        "---\nname: worker\ndescription: Answers.\ntools: Read\n---\nAnswer.\n"
    )
    (project / ".membrane" / "config.toml").write_text(
        '[models.soak]\nprovider = "openai"\nmodel = "soak"\nstream = false\n'
        f'base_url = "http://127.0.0.1:{http.server_port}/v1"\napi_key_env = "SOAK_KEY"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMBRANE_")}
    env |= {"MEMBRANE_HOME": str(home), "SOAK_KEY": "soak"}
    sock = folder / "sock" / "m.sock"
    server = subprocess.Popen(
        [sys.executable, "-m", "membrane", "serve", "--socket", str(sock)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        assert "listening on" in server.stderr.readline()
        anyio.run(_clients, sock, home, project, FIRST)
        first = rss_and_fds(server.pid)
        began = time.monotonic()
        anyio.run(_clients, sock, home, project, LAST - FIRST)
        last = rss_and_fds(server.pid)
        rate = (LAST - FIRST) / (time.monotonic() - began)
        print(f"through the server: {rate:.0f} runs/s with {CLIENTS} clients", flush=True)
    finally:
        server.terminate()
        server.wait()
        http.shutdown()
    report("membrane serve", first, last)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "in-process").mkdir()
        anyio.run(in_process, base / "in-process")
        through_server(base / "server")


if __name__ == "__main__":
    main()
