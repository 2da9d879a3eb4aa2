"""Reads outside the read roots ask the host where the settings say so (``read_outside =
"ask"``), down the path ``ask`` rules take: the approver answers, without one the read is
``approval-unavailable``, and the permission mode decides first. A secret place is asked about
only when a rule names its exact path; ``$MEMBRANE_HOME`` never.

Real ``Read``, ``Glob`` and ``Grep`` on a temporary project; the model is the only double."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from membrane.builtin_tools import register_builtin_tools
from membrane.config.values import Settings
from membrane.models.base import Message
from membrane.runtime import SubagentStartRequest
from membrane.testing import ScriptedModel
from membrane.tools.permissions import ApprovalRequest
from membrane.tools.registry import ToolRegistry

from .conftest import Project

pytestmark = pytest.mark.anyio


@pytest.fixture
def real(project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    registry = ToolRegistry()
    register_builtin_tools(registry)
    project.registry = registry
    project.settings = Settings(read_outside="ask")
    home = tmp_path / "user"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host secret\n")
    monkeypatch.setenv("HOME", str(home))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("far away\n")
    (elsewhere / ".env").write_text("TOKEN=x\n")
    return project


def _calls(*calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"tool_calls": [{"name": name, "arguments": args} for name, args in calls]},
        {"text": "done"},
    ]


def _results(model: ScriptedModel) -> list[Message]:
    return [m for m in model.requests[-1].messages if m.role == "tool"]


def _codes(model: ScriptedModel) -> list[str | None]:
    return [json.loads(m.content)["error"]["code"] if m.is_error else None for m in _results(model)]


async def _run(project: Project, agent: str, model: ScriptedModel, **options: Any) -> None:
    async with project.runtime(model, **options) as runtime:
        await runtime.run(SubagentStartRequest(agent, "look"))


async def test_a_read_outside_the_roots_goes_to_the_approver(real: Project, tmp_path: Path) -> None:
    real.agent("reader", tools="[Read, Glob, Grep]")
    far = tmp_path / "elsewhere"
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return request.tool != "Glob"

    calls = _calls(
        ("Read", {"file_path": str(far / "notes.txt")}),
        ("Grep", {"pattern": "far", "path": str(far)}),
        ("Glob", {"pattern": "*", "path": str(far)}),
    )
    model = ScriptedModel({"agents": {"reader": calls}})
    await _run(real, "reader", model, approver=approver)
    # The three calls run side by side: each is asked about once, in whatever order they ask.
    by_tool = {r.tool: r for r in asked}
    assert len(asked) == 3
    assert {tool: r.subject for tool, r in by_tool.items()} == {
        "Read": str(far / "notes.txt"),
        "Grep": str(far),
        "Glob": str(far),
    }
    assert by_tool["Read"].arguments == {"file_path": str(far / "notes.txt")}
    assert "read_outside" in by_tool["Read"].reason
    assert _codes(model) == [None, None, "tool-call-denied"]
    assert "far away" in _results(model)[0].content
    # The approved folder is read, the .env file inside it is not.
    assert "notes.txt" in _results(model)[1].content and ".env" not in _results(model)[1].content


async def test_with_no_approver_a_read_outside_is_approval_unavailable(
    real: Project, tmp_path: Path
) -> None:
    real.agent("reader", tools="[Read]")
    calls = _calls(("Read", {"file_path": str(tmp_path / "elsewhere" / "notes.txt")}))
    model = ScriptedModel({"agents": {"reader": calls}})
    await _run(real, "reader", model)
    assert _codes(model) == ["approval-unavailable"]


async def test_the_permission_mode_decides_before_the_approver(
    real: Project, tmp_path: Path
) -> None:
    far = str(tmp_path / "elsewhere" / "notes.txt")
    # The deployment's mode is the ceiling; each definition's mode applies under it.
    real.settings = Settings(read_outside="ask", permission_mode="bypassPermissions")
    real.agent("bold", tools="[Read]", permission="bypassPermissions")
    real.agent("quiet", tools="[Read]", permission="dontAsk")
    asked: list[ApprovalRequest] = []
    model = ScriptedModel(
        {
            "agents": {
                "bold": _calls(("Read", {"file_path": far})),
                "quiet": _calls(("Read", {"file_path": far})),
            }
        }
    )
    async with real.runtime(model, approver=asked.append) as runtime:
        await runtime.run(SubagentStartRequest("bold", "look"))
        bold = _codes(model)
        await runtime.run(SubagentStartRequest("quiet", "look"))
    assert bold == [None] and _codes(model) == ["tool-call-denied"]
    assert asked == []


async def test_secret_places_and_the_state_are_never_asked_about_unless_a_rule_names_them(
    real: Project, tmp_path: Path, isolated_home: Path
) -> None:
    secret = tmp_path / "user" / ".ssh" / "config"
    state = isolated_home / "config.toml"
    state.write_text("")
    real.agent("reader", tools="[Read]")
    real.agent("named", tools=f"[Read, 'Read(~/.ssh/config)', 'Read(//{state})']")
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    reads = (
        ("Read", {"file_path": str(secret)}),
        ("Read", {"file_path": str(tmp_path / "elsewhere" / ".env")}),
        ("Read", {"file_path": str(state)}),
    )
    model = ScriptedModel({"agents": {"reader": _calls(*reads), "named": _calls(*reads)}})
    async with real.runtime(model, approver=approver) as runtime:
        await runtime.run(SubagentStartRequest("reader", "look"))
        unnamed = _codes(model)
        await runtime.run(SubagentStartRequest("named", "look"))
    assert unnamed == ["path-outside-checkout"] * 3
    assert [r.subject for r in asked] == [str(secret)]
    assert _codes(model) == [None, "path-outside-checkout", "path-outside-checkout"]
    assert "Host secret" in _results(model)[0].content


async def test_by_default_a_read_outside_is_refused_and_no_one_is_asked(
    real: Project, tmp_path: Path
) -> None:
    real.settings = Settings()
    real.agent("reader", tools="[Read]")
    calls = _calls(("Read", {"file_path": str(tmp_path / "elsewhere" / "notes.txt")}))
    model = ScriptedModel({"agents": {"reader": calls}})
    asked: list[ApprovalRequest] = []
    await _run(real, "reader", model, approver=asked.append)
    assert _codes(model) == ["path-outside-checkout"] and asked == []
