"""The approval timeout of a real ``membrane serve`` (``--approval-timeout``): a client that said
it can answer ``approval/request`` but never does leaves the call ``approval-unavailable``
(denied) once the timeout has passed, and the model reads a reason it can act on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, Running, serve, stop

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
ROLES = '[roles.ops]\nallow = ["Read", "Write", "Bash"]\n'
SCRIPT = {
    "agents": {
        "maker": [
            {"tool_calls": [{"name": "Bash", "arguments": {"command": "touch made.txt"}}]},
            {"text": "made"},
        ]
    }
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    base = tmp_path_factory.mktemp("approval-timeout")
    home = base / "home"
    home.mkdir()
    project = base / "project"
    (project / ".membrane" / "agents").mkdir(parents=True)
    (project / ".membrane" / "agents" / "maker.md").write_text(AGENT, encoding="utf-8")
    (project / ".membrane" / "config.toml").write_text(ROLES, encoding="utf-8")
    (base / "script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
    socket = base / "sock" / "m.sock"
    proc = serve(socket, home, "--role", "ops", "--approval-timeout", "0.5")
    try:
        yield Running(socket=socket, home=home, project=project, pid=proc.pid)
    finally:
        stop(proc)


@pytest.mark.anyio
async def test_a_client_that_never_answers_leaves_the_call_denied_after_the_timeout(
    served: Running, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[JSONDict] = []
    never = anyio.Event()

    async def answer(params: JSONDict) -> JSONValue:
        asked.append(params)
        await never.wait()  # the client holds the question and never replies
        return {"decision": "allow"}

    codes: list[object] = []
    with anyio.fail_after(START_BOUND):
        async with Client.connect(served.socket) as client:
            client.answer("approval/request", answer)
            await client.request("initialize", {"capabilities": {"approval": True}})
            reply = await client.request("projects/add", {"root": str(served.project)})
            ids: JSONDict = {"projectId": reply["projectId"]}
            await client.request("events/subscribe", ids)
            model = f"scripted:{served.project.parent / 'script.json'}"
            start = {**ids, "agent": "maker", "task": "make", "model": model, "background": True}
            run_id = (await client.request("runs/start", start))["run"]["run_id"]
            async for note in client.notifications:
                event = note.params["event"]
                if event["run_id"] != run_id:
                    continue
                if event["kind"] == "tool_result":
                    codes.append(event["data"].get("code"))
                if event["kind"] in ("completed", "error", "stopped"):
                    break
    # The question was put to the client, which was still connected and never answered.
    assert [a["tool"] for a in asked] == ["Bash"] and not never.is_set()
    assert codes == ["approval-unavailable"]
    assert not (served.project / "made.txt").exists()
    # What the model read as the call's result: the code and why, with what it can do instead.
    monkeypatch.setenv("MEMBRANE_HOME", str(served.home))
    assert main(["show", run_id, "--project", str(served.project), "--json", "--full"]) == 0
    [call] = json.loads(capsys.readouterr().out)["tool_calls"]
    result = str(call["result"])
    assert call["is_error"] and "approval-unavailable" in result
    assert "did not answer within 0.5 s" in result
    assert "use a command or path the rules allow" in result


def test_the_timeout_must_be_positive(tmp_path: Path) -> None:
    code = main(["serve", "--socket", str(tmp_path / "s.sock"), "--approval-timeout", "0"])
    assert code == 2
