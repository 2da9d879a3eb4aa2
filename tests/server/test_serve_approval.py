"""``ask`` over the socket: a real ``membrane serve`` sends ``approval/request`` to the client
that started the run, if that client said in ``initialize`` that it can answer; otherwise, when
the client goes away, or when it does not answer within ``--approval-timeout``, the call is
``approval-unavailable``. The runtime-backed ``membrane run`` on a pseudo-terminal answers with
the same prompt as the in-process run."""

from __future__ import annotations

import json
import os
import pty
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from server_support import START_BOUND, Running, clean_env, owner, serve, stop

from membrane.cli.app import main
from membrane.json_types import JSONDict, JSONValue
from membrane.server import Client

AGENT = """---
name: maker
description: Makes files.
tools: Write, Bash(echo:*)
---
Make them.
"""
#: The role the runtime's callers get: the maker's tools (the default role is read-only).
ROLES = '[roles.ops]\nallow = ["Read", "Write", "Bash"]\n'
SCRIPT = {
    "agents": {
        "maker": [
            {"tool_calls": [{"name": "Bash", "arguments": {"command": "touch out/made.txt"}}]},
            {"text": "made"},
        ]
    }
}


def _serving(tmp_path_factory: pytest.TempPathFactory, *args: str) -> Iterator[Running]:
    """A ``membrane serve --role ops ARGS`` on a project holding the maker."""
    base = tmp_path_factory.mktemp("approval")
    home = base / "home"
    home.mkdir()
    project = base / "project"
    (project / ".membrane" / "agents").mkdir(parents=True)
    (project / ".membrane" / "agents" / "maker.md").write_text(AGENT, encoding="utf-8")
    (project / ".membrane" / "config.toml").write_text(ROLES, encoding="utf-8")
    # The maker's file goes to a folder of the checkout: under Landlock (the sandbox where no
    # bwrap is) nothing new can be made at the checkout's top level.
    (project / "out").mkdir()
    (base / "script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
    socket = base / "sock" / "m.sock"
    proc = serve(socket, home, "--role", "ops", *args)
    try:
        yield Running(socket=socket, home=home, project=project, pid=proc.pid)
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    yield from _serving(tmp_path_factory)


@pytest.fixture(scope="module")
def impatient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A server that waits half a second for an answer (``--approval-timeout``)."""
    yield from _serving(tmp_path_factory, "--approval-timeout", "0.5")


async def _start(client: Client, served: Running, *, capable: bool) -> tuple[JSONDict, str]:
    hello: JSONDict = {"capabilities": {"approval": True}} if capable else {}
    hello["identity"] = owner(served.home)
    info = await client.request("initialize", hello)
    assert info["capabilities"]["approval"] == {"request": True}
    project_id = (await client.request("projects/add", {"root": str(served.project)}))["projectId"]
    ids: JSONDict = {"projectId": project_id}
    await client.request("events/subscribe", ids)
    model = f"scripted:{served.project.parent / 'script.json'}"
    start = {**ids, "agent": "maker", "task": "make", "model": model, "background": True}
    run = (await client.request("runs/start", start))["run"]
    return ids, str(run["run_id"])


async def _outcome(client: Client, run_id: str) -> list[str | None]:
    """The codes of the run's tool results, from its events, once it ended."""
    codes: list[str | None] = []
    async for note in client.notifications:
        event = note.params["event"]
        if event["run_id"] != run_id:
            continue
        if event["kind"] == "tool_result":
            codes.append(event["data"].get("code"))
        if event["kind"] in ("completed", "error", "stopped"):
            return codes
    raise AssertionError("the event stream ended before the run")


@pytest.mark.anyio
@pytest.mark.parametrize("decision", ["allow", "deny"])
async def test_the_starting_client_answers_the_ask(served: Running, decision: str) -> None:
    made = served.project / "out" / "made.txt"
    made.unlink(missing_ok=True)
    asked: list[JSONDict] = []

    async def answer(params: JSONDict) -> JSONValue:
        asked.append(params)
        return {"decision": decision}

    with anyio.fail_after(START_BOUND):
        async with Client.connect(served.socket) as client:
            client.answer("approval/request", answer)
            _, run_id = await _start(client, served, capable=True)
            codes = await _outcome(client, run_id)
    [request] = asked
    assert request["runId"] == run_id and request["agent"] == "maker"
    assert request["tool"] == "Bash" and request["subject"] == "touch out/made.txt"
    assert request["arguments"] == {"command": "touch out/made.txt"}
    assert "Bash is granted only through rules" in str(request["rule"])
    if decision == "allow":
        assert codes == [None] and made.exists()
    else:
        assert codes == ["tool-call-denied"] and not made.exists()


@pytest.mark.anyio
async def test_a_client_that_cannot_answer_gets_no_request(served: Running) -> None:
    (served.project / "out" / "made.txt").unlink(missing_ok=True)
    asked: list[Any] = []

    async def answer(params: JSONDict) -> JSONValue:
        asked.append(params)
        return {"decision": "allow"}

    with anyio.fail_after(START_BOUND):
        async with Client.connect(served.socket) as client:
            client.answer("approval/request", answer)  # but it never said it can
            _, run_id = await _start(client, served, capable=False)
            codes = await _outcome(client, run_id)
    assert codes == ["approval-unavailable"] and asked == []
    assert not (served.project / "out" / "made.txt").exists()


@pytest.mark.anyio
async def test_a_client_that_disconnects_leaves_the_call_unapproved(served: Running) -> None:
    (served.project / "out" / "made.txt").unlink(missing_ok=True)
    asked = anyio.Event()
    never = anyio.Event()

    async def answer(params: JSONDict) -> JSONValue:
        asked.set()
        await never.wait()
        return {"decision": "allow"}

    with anyio.fail_after(START_BOUND):
        async with Client.connect(served.socket) as watcher:
            await watcher.request("initialize", {"identity": owner(served.home)})
            reply = await watcher.request("projects/add", {"root": str(served.project)})
            await watcher.request("events/subscribe", {"projectId": reply["projectId"]})
            async with Client.connect(served.socket) as client:
                client.answer("approval/request", answer)
                _, run_id = await _start(client, served, capable=True)
                await asked.wait()
            codes = await _outcome(watcher, run_id)
    assert codes == ["approval-unavailable"]
    assert not (served.project / "out" / "made.txt").exists()


@pytest.mark.anyio
async def test_a_client_that_never_answers_leaves_the_call_denied_after_the_timeout(
    impatient: Running, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[JSONDict] = []
    never = anyio.Event()

    async def answer(params: JSONDict) -> JSONValue:
        asked.append(params)
        await never.wait()  # the client holds the question and never replies
        return {"decision": "allow"}

    with anyio.fail_after(START_BOUND):
        async with Client.connect(impatient.socket) as client:
            client.answer("approval/request", answer)
            _, run_id = await _start(client, impatient, capable=True)
            codes = await _outcome(client, run_id)
    # The question reached the client, still connected, which never answered: denied.
    assert [a["tool"] for a in asked] == ["Bash"] and not never.is_set()
    assert codes == ["approval-unavailable"]
    assert not (impatient.project / "out" / "made.txt").exists()
    # What the model read as the call's result: the code, why, and what it can do instead.
    monkeypatch.setenv("MEMBRANE_HOME", str(impatient.home))
    assert main(["show", run_id, "--project", str(impatient.project), "--json", "--full"]) == 0
    [call] = json.loads(capsys.readouterr().out)["tool_calls"]
    result = str(call["result"])
    assert call["is_error"] and "approval-unavailable" in result
    assert "did not answer within 0.5 s" in result
    assert "use a command or path the rules allow" in result


@pytest.mark.parametrize("seconds", ["0", "-1", "inf", "nan"])
def test_the_approval_timeout_must_be_positive_and_finite(tmp_path: Path, seconds: str) -> None:
    code = main(["serve", "--socket", str(tmp_path / "s.sock"), "--approval-timeout", seconds])
    assert code == 2


def _read_until(fd: int, marker: bytes) -> bytes:
    seen = b""
    while marker not in seen:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    return seen


@pytest.mark.skipif(sys.platform != "linux", reason="needs a Linux pseudo-terminal")
def test_a_runtime_backed_run_on_a_terminal_puts_the_ask_to_the_user(served: Running) -> None:
    made = served.project / "out" / "made.txt"
    made.unlink(missing_ok=True)
    script = served.project.parent / "script.json"
    argv = [sys.executable, "-m", "membrane", "run", "maker", "make"]
    argv += ["--project", str(served.project), "--model", f"scripted:{script}"]
    env = clean_env(served.home, MEMBRANE_SOCKET=str(served.socket), COLUMNS="200", TERM="xterm")
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child process
        os.execve(sys.executable, argv, env)
    try:
        first = _read_until(fd, b"[y/N]")
        assert b"maker asks to run Bash" in first and b"touch out/made.txt" in first
        os.write(fd, b"y\n")
        rest = _read_until(fd, b"\x00never")
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, (first + rest).decode()
    assert made.exists()
    assert b"approved" in rest
