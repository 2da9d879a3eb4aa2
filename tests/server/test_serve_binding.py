"""Tokens and replies bound to their caller, against a real ``membrane serve``: a run's token
dies with its run on every open connection, and a reply cached by ``requestId`` is never
replayed to another caller."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, Running, make_project, owner, serve, stop

from membrane.errors import MembraneError
from membrane.server import Client

pytestmark = pytest.mark.anyio


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    """A ``membrane serve --role ops``: the owner's callers may use Bash."""
    home = tmp_path / "home"
    home.mkdir()
    project = make_project(tmp_path / "project")
    socket = tmp_path / "sock" / "m.sock"
    proc = serve(socket, home, "--role", "ops")
    try:
        yield Running(socket=socket, home=home, project=project, pid=proc.pid)
    finally:
        stop(proc)


async def test_an_ended_runs_token_is_refused_on_a_connection_opened_while_it_was_live(
    running: Running, tmp_path: Path
) -> None:
    # The child hands its token out through a FIFO, then waits in a long command.
    fifo = running.project / "token.fifo"
    os.mkfifo(fifo)
    fifo.chmod(0o666)
    turns = [
        {
            "tool_calls": [
                {"name": "Bash", "arguments": {"command": 'echo "$MEMBRANE_TOKEN" > token.fifo'}}
            ]
        },
        {"tool_calls": [{"name": "Bash", "arguments": {"command": "sleep 600"}}]},
        {"text": "done"},
    ]
    script = tmp_path / "reader.json"
    script.write_text(json.dumps({"agents": {"reader": turns}}))
    refused: dict[str, str] = {}
    with anyio.fail_after(START_BOUND * 2):
        async with Client.connect(running.socket) as host:
            await host.request("initialize", {"identity": owner(running.home)})
            ids = {
                "projectId": (await host.request("projects/add", {"root": str(running.project)}))[
                    "projectId"
                ]
            }
            start = {**ids, "agent": "reader", "task": "wait", "model": f"scripted:{script}"}
            run_id = (await host.request("runs/start", {**start, "background": True}))["run"][
                "run_id"
            ]
            token = (await anyio.to_thread.run_sync(fifo.read_text)).strip()
            async with Client.connect(running.socket) as child:
                info = await child.request("initialize", {"identity": {"token": token}})
                assert info["caller"]["runId"] == run_id
                assert (await child.request("projects/list"))["projects"]
                await host.request("runs/stop", {**ids, "runId": run_id})
                for method, params in (
                    ("projects/list", {}),
                    ("events/subscribe", ids),
                    ("actions/list", ids),
                    ("runs/list", ids),
                    ("projects/add", {"root": str(running.project)}),
                ):
                    with pytest.raises(MembraneError) as caught:
                        await child.request(method, params)
                    refused[method] = caught.value.code
    assert set(refused.values()) == {"token-invalid"}, refused


async def test_a_cached_reply_is_never_replayed_to_another_caller(
    running: Running,
) -> None:
    (running.project / "secret.txt").write_text("the owner's secret")
    bash = {"name": "Bash", "arguments": {"command": "cat secret.txt"}, "requestId": "r-1"}
    read = {"name": "Read", "arguments": {"file_path": "notes.txt"}, "requestId": "r-1"}
    with anyio.fail_after(START_BOUND):
        async with Client.connect(running.socket) as mine:
            await mine.request("initialize", {"identity": owner(running.home, sessionId="s")})
            ids = {
                "projectId": (await mine.request("projects/add", {"root": str(running.project)}))[
                    "projectId"
                ]
            }
            first = (await mine.request("actions/call", {**ids, **bash}))["result"]
            assert "the owner's secret" in json.dumps(first)
            # The same id again, from the same caller: the first reply.
            assert (await mine.request("actions/call", {**ids, **bash}))["result"] == first
            # Another caller naming the same session and request id gets no reply of it.
            async with Client.connect(running.socket) as stranger:
                await stranger.request("initialize", {"identity": {"sessionId": "s"}})
                await stranger.request("projects/add", {"root": str(running.project)})
                with pytest.raises(MembraneError) as caught:
                    await stranger.request("actions/call", {**ids, **bash})
                own = (await stranger.request("actions/call", {**ids, **read}))["result"]
    assert caught.value.code == "tool-not-visible"
    assert "secret" not in json.dumps(own) and "alpha" in json.dumps(own)
