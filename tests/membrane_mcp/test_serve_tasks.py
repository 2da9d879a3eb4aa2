"""Delegation over ``membrane mcp serve``: the official client starts subagents with ``Task``."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from membrane.store import SQLiteStore

from .conftest import McpProject
from .test_serve import configure, served

pytestmark = pytest.mark.anyio

SCRIPT = """\
agents:
  helper:
    - tool_calls:
        - {name: Bash, arguments: {command: "echo leaked > leaked.txt"}}
        - {name: Read, arguments: {file_path: notes.txt}}
    - text: "helped with the notes"
"""


def project_with_helper(project: McpProject) -> Path:
    configure(
        project,
        '[roles.lead]\nallow = ["Read", "Task", "TaskList", "TaskWait"]\n'
        '[roles.reader]\nallow = ["Read"]\n',
    )
    project.agent("helper", tools="Read, Bash")
    (project.root / "notes.txt").write_text("alpha\n", encoding="utf-8")
    script = project.home / "script.yaml"
    script.write_text(SCRIPT, encoding="utf-8")
    return script


async def test_a_client_delegates_through_task_with_the_role_in_force(
    mcp_project: McpProject,
) -> None:
    script = project_with_helper(mcp_project)
    state = mcp_project.home / "served.db"
    args = ("--role", "lead", "--model", f"scripted:{script}", "--state", str(state))
    with anyio.fail_after(90):
        async with served(mcp_project, *args) as session:
            names = sorted(t.name for t in (await session.list_tools()).tools)
            assert names == ["Read", "Task", "TaskList", "TaskWait"]
            done = await session.call_tool("Task", {"agent": "helper", "task": "tidy the notes"})
            assert not done.is_error, done.content
            result = json.loads(done.content[0].text)  # type: ignore[union-attr]
            assert result["status"] == "completed"
            assert result["text"] == "helped with the notes"
            listed = await session.call_tool("TaskList", {})
            runs = json.loads(listed.content[0].text)["runs"]  # type: ignore[union-attr]
            assert [run["run_id"] for run in runs] == [result["run_id"]]
            # Only this server's runs are reachable.
            other = await session.call_tool("TaskWait", {"ids": ["run-not-mine"]})
            assert other.is_error
            assert "unknown-run" in other.content[0].text  # type: ignore[union-attr]
    # The child ran under the role: its Bash was vetoed (nothing written), its Read ran.
    assert not (mcp_project.root / "leaked.txt").exists()
    store = SQLiteStore(state)
    try:
        events = store.events(session_id=result["run_id"])
    finally:
        store.close()
    vetoed = [e.data for e in events if e.kind == "vetoed_call"]
    assert [(v["name"], v["code"]) for v in vetoed] == [("Bash", "tool-not-visible")]
    ran = [e.data["name"] for e in events if e.kind == "tool_result" and not e.data["is_error"]]
    assert ran == ["Read"]


async def test_a_role_without_task_can_neither_see_nor_call_it(mcp_project: McpProject) -> None:
    script = project_with_helper(mcp_project)
    with anyio.fail_after(60):
        args = ("--role", "reader", "--model", f"scripted:{script}")
        async with served(mcp_project, *args, client="lead") as session:
            assert [t.name for t in (await session.list_tools()).tools] == ["Read"]
            refused = await session.call_tool(
                "Task",
                {"agent": "helper", "task": "x"},
                meta={"role": "lead"},  # type: ignore[arg-type]
            )
            assert refused.is_error
            assert "tool-not-visible" in refused.content[0].text  # type: ignore[union-attr]
            assert "helper" not in refused.content[0].text  # type: ignore[union-attr]
    assert not (mcp_project.root / "leaked.txt").exists()


async def test_an_agent_view_delegates_only_to_its_allowed_subagents(
    mcp_project: McpProject,
) -> None:
    script = project_with_helper(mcp_project)
    mcp_project.agent("other", tools="Read")
    mcp_project.agent("lead", tools="Read, Task", allowed_subagents="[helper]")
    with anyio.fail_after(90):
        args = ("--agent", "lead", "--model", f"scripted:{script}")
        async with served(mcp_project, *args) as session:
            names = sorted(t.name for t in (await session.list_tools()).tools)
            assert "Task" in names
            refused = await session.call_tool("Task", {"agent": "other", "task": "x"})
            assert refused.is_error
            # `agent` is an enum of what lead may start: Task's schema refuses `other`.
            text = refused.content[0].text  # type: ignore[union-attr]
            assert "tool-arguments-invalid" in text and "is not one of ['helper']" in text
            done = await session.call_tool("Task", {"agent": "helper", "task": "tidy"})
            assert not done.is_error, done.content
