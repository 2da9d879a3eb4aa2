"""Methods of a real ``membrane serve``: rate limits, events, list_changed, runs and errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from server_support import START_BOUND, Running, make_project, owner, register, serve, stop

from membrane.errors import MembraneError
from membrane.server import Client

pytestmark = pytest.mark.anyio

EXTENSION = """\
from membrane.tools import Tool


async def _late(arguments, context):
    return "late"


def setup(ext):
    async def add(arguments, context):
        name = arguments["name"]
        ext.register_tool(Tool(name, "Registered later.", {"type": "object"}, _late))
        return name

    ext.register_tool(
        Tool(
            "add_tool",
            "Registers a tool.",
            {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            add,
        )
    )
"""

CONFIG = """\
[roles.external]
allow = ["Read", "Grep", "add_tool", "late_visible"]

[rate_limits.Grep]
max_calls = 3
window_seconds = 3600
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    base = tmp_path_factory.mktemp("methods")
    home = base / "home"
    home.mkdir()
    project = make_project(base / "project")
    (project / ".membrane" / "config.toml").write_text(CONFIG)
    (project / ".membrane" / "extensions").mkdir()
    (project / ".membrane" / "extensions" / "late.py").write_text(EXTENSION)
    socket = base / "sock" / "m.sock"
    proc = serve(socket, home)
    try:
        register(socket, home, project)
        yield socket, project
    finally:
        stop(proc)


async def _open(client: Client, project: Path, **identity: str) -> dict[str, str]:
    await client.request("initialize", {"identity": identity})
    reply = await client.request("projects/add", {"root": str(project)})
    return {"projectId": reply["projectId"]}


async def test_a_session_over_its_rate_limit_is_told_when_to_retry(
    served: tuple[Path, Path],
) -> None:
    socket, project = served
    grep = {"name": "Grep", "arguments": {"pattern": "alpha"}}
    with anyio.fail_after(START_BOUND):
        async with Client.connect(socket) as client:
            ids = await _open(client, project, **owner(project.parent / "home", sessionId="chat-a"))
            for _ in range(3):
                await client.request("actions/call", {**ids, **grep})
            with pytest.raises(MembraneError) as caught:
                await client.request("actions/call", {**ids, **grep})
        async with Client.connect(socket) as other:
            ids = await _open(other, project, **owner(project.parent / "home", sessionId="chat-b"))
            await other.request("actions/call", {**ids, **grep})  # another session's window
    assert caught.value.code == "rate-limited"
    assert 0 < caught.value.data["retry_after_seconds"] <= 3600
    assert caught.value.data["tool"] == "Grep"


async def test_list_changed_is_sent_only_when_the_callers_view_changes(
    served: tuple[Path, Path],
) -> None:
    socket, project = served
    with anyio.fail_after(START_BOUND):
        async with Client.connect(socket) as client:
            ids = await _open(client, project)
            before = await client.request("actions/list", ids)
            assert "late_visible" not in [a["name"] for a in before["actions"]]
            # A tool the role does not admit changes the registry, not this caller's view.
            await client.request(
                "actions/call", {**ids, "name": "add_tool", "arguments": {"name": "late_hidden"}}
            )
            await client.request(
                "actions/call", {**ids, "name": "add_tool", "arguments": {"name": "late_visible"}}
            )
            note = await client.notifications.receive()
            assert note.method == "actions/list_changed" and note.params == ids
            after = await client.request("actions/list", ids)
            assert [a["name"] for a in after["actions"]] == [
                "Grep",
                "Read",
                "add_tool",
                "late_visible",
            ]
            with pytest.raises(anyio.WouldBlock):
                client.notifications.receive_nowait()
            assert (await client.request("actions/call", {**ids, "name": "late_visible"}))[
                "result"
            ] == "late"
            with pytest.raises(MembraneError) as caught:
                await client.request("actions/call", {**ids, "name": "late_hidden"})
    assert caught.value.code == "tool-not-visible"


async def test_events_stream_a_runs_lifecycle_and_runs_methods_answer(
    served: tuple[Path, Path], tmp_path: Path
) -> None:
    socket, project = served
    script = tmp_path / "script.yaml"
    script.write_text(
        json.dumps(
            {
                "agents": {
                    "reader": [
                        {"tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}]},
                        {"text": "two lines"},
                    ]
                }
            }
        )
    )
    kinds: list[str] = []
    with anyio.fail_after(START_BOUND):
        async with Client.connect(socket) as client:
            ids = await _open(client, project, **owner(project.parent / "home"))
            assert await client.request("events/subscribe", ids) == {"subscribed": True}
            start = {**ids, "agent": "reader", "task": "count", "model": f"scripted:{script}"}
            run = (await client.request("runs/start", {**start, "background": True}))["run"]
            async for note in client.notifications:
                event = note.params["event"]
                if event["run_id"] == run["run_id"]:
                    kinds.append(event["kind"])
                    if event["kind"] in ("completed", "error", "stopped"):
                        break
            got = (await client.request("runs/get", {**ids, "runId": run["run_id"]}))["run"]
            listed = (await client.request("runs/list", ids))["runs"]
            waited = (await client.request("runs/wait", {**ids, "runId": run["run_id"]}))["run"]
            with pytest.raises(MembraneError) as unknown:
                await client.request("runs/get", {**ids, "runId": "nope"})
    assert kinds[0] == "published" and kinds[-1] == "completed"
    assert "tool_call" in kinds and "turn" in kinds
    assert got["status"] == "completed" and waited["result"]["text"] == "two lines"
    assert run["run_id"] in [r["run_id"] for r in listed]
    assert unknown.value.code == "unknown-run"


async def test_runs_start_takes_a_budget_and_a_bad_one_is_refused(
    served: tuple[Path, Path], tmp_path: Path
) -> None:
    socket, project = served
    turn = {"tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}]}
    script = tmp_path / "script.yaml"
    script.write_text(json.dumps({"agents": {"reader": [turn] * 5 + [{"text": "done"}]}}))
    with anyio.fail_after(START_BOUND):
        async with Client.connect(socket) as client:
            ids = await _open(client, project)
            start = {**ids, "agent": "reader", "task": "count", "model": f"scripted:{script}"}
            run = (await client.request("runs/start", {**start, "budget": {"turns": 2}}))["run"]
            waited = (await client.request("runs/wait", {**ids, "runId": run["run_id"]}))["run"]
            with pytest.raises(MembraneError) as bad:
                await client.request("runs/start", {**start, "budget": {"turns": -1}})
    error = waited["result"]["error"]
    assert waited["status"] == "error" and waited["result"]["turns"] == 2
    assert (error["code"], error["data"]["kind"]) == ("budget-exceeded", "turns")
    assert bad.value.code == "invalid-request"


async def test_runs_start_takes_argument_rules_for_that_run(
    served: tuple[Path, Path], tmp_path: Path
) -> None:
    socket, project = served
    turn = {"tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}]}
    script = tmp_path / "script.yaml"
    script.write_text(json.dumps({"agents": {"reader": [turn, {"text": "done"}]}}))
    rules = [{"tool": "Read", "deny": {"file_path": {"glob": "*.txt"}}, "reason": "no notes"}]
    kinds: list[str] = []
    with anyio.fail_after(START_BOUND):
        async with Client.connect(socket) as client:
            ids = await _open(client, project)
            await client.request("events/subscribe", ids)
            start = {**ids, "agent": "reader", "task": "count", "model": f"scripted:{script}"}
            run = (await client.request("runs/start", {**start, "rules": rules}))["run"]
            async for note in client.notifications:
                event = note.params["event"]
                if event["run_id"] == run["run_id"]:
                    kinds.append(event["kind"])
                    if event["kind"] in ("completed", "error", "stopped"):
                        break
            with pytest.raises(MembraneError) as bad:
                await client.request("runs/start", {**start, "rules": [{"tool": "Read"}]})
    assert "vetoed_call" in kinds and kinds[-1] == "completed"
    assert bad.value.code == "invalid-request"


async def test_every_method_needs_initialize_and_projects_are_listed_and_removed(
    served: tuple[Path, Path], tmp_path: Path
) -> None:
    socket, project = served
    other = make_project(tmp_path / "other")
    with anyio.fail_after(START_BOUND):
        async with Client.connect(socket) as client:
            with pytest.raises(MembraneError) as first:
                await client.request("projects/list")
            ids = await _open(client, other, **owner(project.parent / "home"))
            listed = (await client.request("projects/list"))["projects"]
            assert ids["projectId"] in [p["projectId"] for p in listed]
            again = await client.request("projects/add", {"root": str(other)})
            assert again["projectId"] == ids["projectId"]
            assert await client.request("projects/remove", ids) == {"removed": True}
            with pytest.raises(MembraneError) as gone:
                await client.request("actions/list", ids)
            with pytest.raises(MembraneError) as missing:
                await client.request("projects/add", {"root": str(tmp_path / "absent")})
    assert first.value.code == "invalid-request"
    assert gone.value.code == "unknown-project"
    assert missing.value.code == "invalid-request"


LEAD = """\
---
name: lead
description: Plans under the planning gate.
workflow: planning
---
Plan the work.
"""


async def test_the_host_reads_and_answers_a_planning_gate_over_the_socket(
    runtime: Running, tmp_path: Path
) -> None:
    socket, project = runtime.socket, runtime.project
    (project / ".membrane" / "agents" / "lead.md").write_text(LEAD)
    script = tmp_path / "lead.json"
    intake = {"summary": "a flag", "touches_ui_surface": False}
    script.write_text(
        json.dumps(
            {
                "agents": {
                    "lead": [
                        {"tool_calls": [{"name": "recordCodebaseIntake", "arguments": intake}]},
                        {"text": "intake recorded"},
                    ]
                }
            }
        )
    )
    with anyio.fail_after(START_BOUND):
        async with Client.connect(socket) as client:
            ids = await _open(client, project, **owner(runtime.home))
            start = {**ids, "agent": "lead", "task": "plan", "model": f"scripted:{script}"}
            run = (await client.request("runs/start", start))["run"]
            at = {**ids, "runId": run["run_id"]}
            # A caller without the owner's token (a child that dropped its own) is refused.
            async with Client.connect(socket) as stranger:
                await _open(stranger, project)
                with pytest.raises(MembraneError) as stranger_refused:
                    await stranger.request("workflow/answer", {**at, "answer": "approve"})
            shown = (await client.request("workflow/get", at))["workflow"]
            with pytest.raises(MembraneError) as early:
                await client.request("workflow/answer", {**at, "answer": "approve"})
            waived = await client.request(
                "workflow/answer", {**at, "answer": "waive", "value": "extras"}
            )
            with pytest.raises(MembraneError) as unknown:
                await client.request("workflow/get", {**ids, "runId": "nope"})
    assert stranger_refused.value.code == "caller-refused"
    assert shown["phase"] == "planning" and shown["auto_skipped_rounds"] == ["ui"]
    assert early.value.code == "workflow-refused"
    assert waived["workflow"]["waived_rounds"] == ["extras"]
    assert waived["workflow"]["auto_skipped_rounds"] == ["ui"]
    assert unknown.value.code == "unknown-run"
