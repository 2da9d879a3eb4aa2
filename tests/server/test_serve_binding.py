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
                # The runtime contract names the project the token is bound to (seed 002).
                root = info["runtimeInfo"]["projectRoot"]
                assert Path(root) == running.project.resolve()
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


async def test_a_caller_without_proof_reaches_only_the_runs_it_started(
    running: Running, tmp_path: Path
) -> None:
    """A child that dropped its token can neither read, message nor stop a sibling."""
    script = tmp_path / "sleeper.json"
    sleeper = {"tool_calls": [{"name": "Bash", "arguments": {"command": "sleep 600"}}]}
    script.write_text(json.dumps({"agents": {"reader": [sleeper, {"text": "done"}]}}))
    quick = tmp_path / "quick.json"
    quick.write_text(json.dumps({"agents": {"reader": [{"text": "mine"}]}}))
    codes: dict[str, str] = {}
    with anyio.fail_after(START_BOUND * 2):
        async with Client.connect(running.socket) as host:
            await host.request("initialize", {"identity": owner(running.home)})
            ids = {
                "projectId": (await host.request("projects/add", {"root": str(running.project)}))[
                    "projectId"
                ]
            }
            start = {**ids, "agent": "reader", "task": "wait", "model": f"scripted:{script}"}
            sibling = (await host.request("runs/start", {**start, "background": True}))["run"]
            at = {**ids, "runId": sibling["run_id"]}
            async with Client.connect(running.socket) as stranger:
                await stranger.request("initialize", {})
                await stranger.request("projects/add", {"root": str(running.project)})
                for method, params in (
                    ("runs/get", at),
                    ("runs/wait", {**at, "timeout": 0}),
                    ("runs/message", {**at, "message": "stop working"}),
                    ("runs/stop", at),
                    ("runs/resume", {**at, "message": "go on"}),
                ):
                    with pytest.raises(MembraneError) as caught:
                        await stranger.request(method, params)
                    codes[method] = caught.value.code
                listed = (await stranger.request("runs/list", ids))["runs"]
                stored = (await stranger.request("runs/list", {**ids, "stored": True}))["runs"]
                own = {**ids, "agent": "reader", "task": "x", "model": f"scripted:{quick}"}
                mine = (await stranger.request("runs/start", own))["run"]
                got = await stranger.request("runs/get", {**ids, "runId": mine["run_id"]})
                relisted = (await stranger.request("runs/list", ids))["runs"]
            still = (await host.request("runs/get", at))["run"]
            await host.request("runs/stop", at)
    assert set(codes.values()) == {"unknown-run"}, codes
    assert listed == [] and stored == []
    assert got["run"]["run_id"] == mine["run_id"]
    assert [r["run_id"] for r in relisted] == [mine["run_id"]]
    assert still["status"] == "running"


async def test_callers_without_proof_share_their_roles_rate_limit_whatever_session_they_name(
    running: Running,
) -> None:
    grep = {"name": "Grep", "arguments": {"pattern": "alpha"}}
    with anyio.fail_after(START_BOUND):
        async with Client.connect(running.socket) as host:
            await host.request("initialize", {"identity": owner(running.home)})
            await host.request("projects/add", {"root": str(running.project)})
        for session, calls in (("a", 3), ("b", 1)):
            async with Client.connect(running.socket) as client:
                await client.request("initialize", {"identity": {"sessionId": session}})
                ids = {
                    "projectId": (
                        await client.request("projects/add", {"root": str(running.project)})
                    )["projectId"]
                }
                for _ in range(calls - 1):
                    await client.request("actions/call", {**ids, **grep})
                if session == "a":
                    await client.request("actions/call", {**ids, **grep})
                else:
                    with pytest.raises(MembraneError) as caught:
                        await client.request("actions/call", {**ids, **grep})
    assert caught.value.code == "rate-limited"
