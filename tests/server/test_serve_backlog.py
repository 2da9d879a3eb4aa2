"""The socket client's connect while a real ``membrane serve``'s backlog is full.

The server is stopped (SIGSTOP) so that it accepts nothing: the kernel queues connections up
to the listen backlog, and every connect past it blocks. Once the backlog is known to be full
(that many clients have connected), the server goes on (SIGCONT) and every client, queued or
blocked, must connect and be answered: never an ``InvalidStateError`` from a connect woken
twice, never a hang.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, clean_env, serve, stop

from membrane.server import Client
from membrane.server.transport import listen_backlog

pytestmark = pytest.mark.anyio

#: Clients past the backlog: their connects block until the server accepts again.
BLOCKED = 24


async def test_clients_past_a_full_backlog_all_connect_once_the_server_accepts(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # This process holds a full backlog and more at once: past the default connection caps.
    caps = "server_max_connections = 4096\nserver_max_connections_per_peer = 4096\n"
    (home / "config.toml").write_text(caps)
    sock = tmp_path / "sock" / "m.sock"
    proc = serve(sock, home, env=clean_env(home))
    # Linux queues the backlog's worth (and one more) before a connect blocks.
    queued = listen_backlog()
    connected = 0
    full = anyio.Event()
    pids: list[int] = []
    failures: list[BaseException] = []

    async def client() -> None:
        nonlocal connected
        try:
            async with Client.connect(sock) as conn:
                connected += 1
                if connected >= queued:
                    full.set()
                reply = await conn.request("initialize", {"clientInfo": {"name": "backlog"}})
                pids.append(reply["runtimeInfo"]["pid"])
        except Exception as exc:  # recorded: the assertion below names it
            failures.append(exc)

    os.kill(proc.pid, signal.SIGSTOP)
    try:
        with anyio.fail_after(START_BOUND):
            # Every connect in a worker thread of its own, so that all of them are under way.
            threads = anyio.to_thread.current_default_thread_limiter()
            old, threads.total_tokens = threads.total_tokens, queued + BLOCKED + 8
            try:
                async with anyio.create_task_group() as group:
                    for _ in range(queued + BLOCKED):
                        group.start_soon(client)
                    await full.wait()
                    # The backlog is full: the rest are blocked in connect (or about to be).
                    assert connected <= queued + 1
                    os.kill(proc.pid, signal.SIGCONT)
            finally:
                threads.total_tokens = old
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        assert stop(proc) == 0
    assert failures == []
    assert pids == [proc.pid] * (queued + BLOCKED)
