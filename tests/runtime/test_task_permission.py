"""OpenCode's ``permission.task`` with ``ask`` and globs: a ``Task`` call for such a subagent goes
to the host's approver like any ``ask`` rule; ``deny`` still refuses; explain lists the rules.

A real OpenCode file under ``.opencode/agents``, the real delegation tools and child runs; the
model is the only double."""

from __future__ import annotations

import json
from typing import Any

import pytest

from membrane.cli.app import main
from membrane.runtime import SubagentStartRequest
from membrane.testing import ScriptedModel
from membrane.tools.permissions import ApprovalRequest

from .conftest import Project

LEAD = """---
description: Leads.
mode: primary
permission:
  task:
    "*": deny
    "review-*": ask
    helper: allow
---
Lead.
"""


@pytest.fixture
def lead(project: Project) -> Project:
    folder = project.root / ".opencode" / "agents"
    folder.mkdir(parents=True)
    (folder / "lead.md").write_text(LEAD, encoding="utf-8")
    for name in ("review-docs", "helper", "other"):
        project.agent(name)
    return project


def _tasks(*agents: str) -> list[dict[str, Any]]:
    calls = [{"name": "Task", "arguments": {"agent": a, "task": "look"}} for a in agents]
    return [{"tool_calls": calls}, {"text": "done"}]


def _codes(model: ScriptedModel) -> list[str | None]:
    last = [r for r in model.requests if r.agent == "lead"][-1]
    tool = [m for m in last.messages if m.role == "tool"]
    return [json.loads(m.content)["error"]["code"] if m.is_error else None for m in tool]


def _model() -> ScriptedModel:
    children = {name: [{"text": f"{name} looked"}] for name in ("review-docs", "helper", "other")}
    return ScriptedModel({"agents": {"lead": _tasks("review-docs", "helper", "other"), **children}})


@pytest.mark.anyio
async def test_a_task_ask_rule_goes_to_the_approver_and_deny_still_refuses(lead: Project) -> None:
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    model = _model()
    async with lead.runtime(model, approver=approve) as runtime:
        await runtime.run(SubagentStartRequest("lead", "lead"))
    assert _codes(model) == [None, None, "tool-call-denied"]
    assert [(r.tool, r.subject) for r in asked] == [("Task", "review-docs")]
    assert "review-*" in asked[0].reason
    # The approved and the allowed subagents ran; the denied one never did.
    assert {r.agent for r in model.requests} == {"lead", "review-docs", "helper"}


@pytest.mark.anyio
async def test_a_task_ask_rule_without_an_approver_is_refused(lead: Project) -> None:
    model = _model()
    async with lead.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "lead"))
    assert _codes(model) == ["approval-unavailable", None, "tool-call-denied"]
    assert {r.agent for r in model.requests} == {"lead", "helper"}


def test_explain_lists_the_task_rules(lead: Project, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(lead.root)
    assert main(["explain", "lead", "--top-level", "--json", "--project", root]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["definition"]["fields"]["allowed_subagents"]["value"] == ["*"]
    task = out["permissions"]["tools"]["Task"]
    assert [(r["pattern"], r["verdict"]) for r in task["rules"]] == [
        (None, "deny"),
        ("review-*", "ask"),
        ("helper", "allow"),
    ]
    assert all(r["source"] == "permission.task" for r in task["rules"])
    assert main(["explain", "lead", "--top-level", "--project", root]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "task 'review-*': ask" in text
