"""Argument-level permission rules, enforced on every call through a child's view.

Real built-in tools (``Bash`` inside the OS sandbox, ``Read``, ``Write``) on a temporary project;
the model is the only double. Each test reads the tool results the model received, the run's
events and the files on disk, so a rule that stopped being enforced fails here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from membrane.builtin_tools import register_builtin_tools
from membrane.models.base import Message
from membrane.resolve import CallParams, Deployment, ParentContext, resolve
from membrane.runtime import SubagentStartRequest
from membrane.testing import ScriptedModel
from membrane.tools.permissions import ApprovalRequest
from membrane.tools.registry import ToolRegistry

from .conftest import Project


@pytest.fixture
def real(project: Project) -> Project:
    registry = ToolRegistry()
    register_builtin_tools(registry)
    project.registry = registry
    return project


def _explain(project: Project, name: str) -> dict[str, Any]:
    """What ``membrane explain NAME --json`` prints for a top-level run of ``name``."""
    registry = project.registry
    definition = project.catalog().dispatch(name, child=False).definition
    parent = ParentContext(tools=registry.tools())
    deployment = Deployment(settings=project.settings, registry_tools=registry.tools())
    return resolve(definition, CallParams(), parent, deployment, depth=0).to_json()


def _bash(*commands: str) -> list[dict[str, Any]]:
    calls = [{"name": "Bash", "arguments": {"command": c}} for c in commands]
    return [{"tool_calls": calls}, {"text": "done"}]


def _results(model: ScriptedModel) -> list[Message]:
    return [m for m in model.requests[-1].messages if m.role == "tool"]


def _codes(model: ScriptedModel) -> list[str | None]:
    out: list[str | None] = []
    for message in _results(model):
        out.append(json.loads(message.content)["error"]["code"] if message.is_error else None)
    return out


HOSTILE = [
    "rm -rf victim",
    "/bin/rm -rf victim",
    "echo hi && rm -rf victim",
    "true; rm -rf victim",
    'bash -c "rm -rf victim"',
    "env FOO=1 rm -rf victim",
    'echo "$(rm -rf victim)"',
    "echo `rm -rf victim`",
    "ls | xargs rm -rf",
    "find . -name victim -exec rm -rf {} ;",
    'eval "rm -rf victim"',
    "sudo rm -rf victim",
    "(cd . && rm -rf victim)",
]


@pytest.mark.anyio
async def test_a_hostile_model_cannot_run_a_denied_rm_in_any_spelling(real: Project) -> None:
    (real.root / "victim").mkdir()
    (real.root / "victim" / "keep.txt").write_text("keep\n")
    real.agent("worker", tools="[Bash, Read]", disallowed_tools="'Bash(rm:*)'")
    model = ScriptedModel({"agents": {"worker": _bash(*HOSTILE, "$(echo rm) -rf victim", "ls")}})
    async with real.runtime(model) as runtime:
        result = await runtime.run(SubagentStartRequest("worker", "clean up"))
        events = list(runtime.store.events(session_id=result.run_id))
    assert (real.root / "victim" / "keep.txt").read_text() == "keep\n"
    codes = _codes(model)
    assert codes[: len(HOSTILE)] == ["tool-call-denied"] * len(HOSTILE)
    # A command whose program the text does not determine needs approval; no one can give it.
    assert codes[len(HOSTILE)] == "approval-unavailable"
    assert codes[-1] is None and "victim" in _results(model)[-1].content
    first = json.loads(_results(model)[0].content)["error"]["message"]
    assert "Bash(rm:*)" in first and "rm -rf victim" in first
    vetoed = [e.data for e in events if e.kind == "vetoed_call"]
    assert len(vetoed) == len(HOSTILE) + 1
    assert vetoed[0]["rule"] == "Bash(rm:*)"


@pytest.mark.anyio
async def test_allow_rules_grant_only_the_commands_they_match(real: Project) -> None:
    # Write makes the checkout writable for the child's commands too (in a folder of it: under
    # Landlock, the sandbox where no bwrap is, nothing new can be made at its top level).
    real.agent("logger", tools="'Bash(echo:*), Write'")
    (real.root / "out").mkdir()
    model = ScriptedModel(
        {
            "agents": {
                "logger": _bash("echo hello", "echo hi > out/made.txt", "echo a && touch out/b")
            }
        }
    )
    async with real.runtime(model) as runtime:
        explained = _explain(real, "logger")
        await runtime.run(SubagentStartRequest("logger", "log"))
    assert explained["tools"]["callable"] == ["Bash", "Write"]
    bash = explained["permissions"]["tools"]["Bash"]
    assert bash["default"] == "ask"
    assert [r["rule"] for r in bash["rules"]] == ["Bash(echo:*)"]
    assert _codes(model) == [None, None, "approval-unavailable"]
    assert "hello" in _results(model)[0].content
    assert (real.root / "out" / "made.txt").exists() and not (real.root / "out" / "b").exists()


@pytest.mark.anyio
async def test_ask_goes_to_the_approver_which_can_allow_or_refuse(real: Project) -> None:
    real.agent("pusher", tools="'Bash(echo:*), Write'")
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return "yes" in (request.subject or "")

    (real.root / "out").mkdir()  # not the top level, which Landlock cannot grant
    model = ScriptedModel({"agents": {"pusher": _bash("touch out/yes.txt", "touch out/no.txt")}})
    async with real.runtime(model, approver=approver) as runtime:
        result = await runtime.run(SubagentStartRequest("pusher", "go"))
    assert [r.subject for r in asked] == ["touch out/yes.txt", "touch out/no.txt"]
    assert asked[0].tool == "Bash" and asked[0].run_id == result.run_id
    assert asked[0].arguments == {"command": "touch out/yes.txt"}
    assert _codes(model) == [None, "tool-call-denied"]
    assert "refused" in _results(model)[1].content
    assert (real.root / "out" / "yes.txt").exists()
    assert not (real.root / "out" / "no.txt").exists()


OPENCODE = """---
description: Runs commands by pattern.
mode: subagent
permission:
  read: allow
  bash:
    "*": ask
    "echo *": allow
    "echo secret*": deny
---
Work.
"""


@pytest.mark.anyio
async def test_opencode_bash_globs_apply_in_order_and_the_last_match_wins(real: Project) -> None:
    folder = real.root / ".opencode" / "agents"
    folder.mkdir(parents=True)
    (folder / "runner.md").write_text(OPENCODE, encoding="utf-8")
    asked: list[str | None] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request.subject)
        return True

    model = ScriptedModel(
        {"agents": {"runner": _bash("echo hi", "echo secret-key", "echo", "pwd")}}
    )
    async with real.runtime(model, approver=approver) as runtime:
        explained = _explain(real, "runner")
        await runtime.run(SubagentStartRequest("runner", "run"))
    rules = explained["permissions"]["tools"]["Bash"]["rules"]
    assert [(r["pattern"], r["verdict"]) for r in rules] == [
        (None, "ask"),
        ("echo *", "allow"),
        ("echo secret*", "deny"),
    ]
    assert _codes(model) == [None, "tool-call-denied", None, None]
    assert asked == ["pwd"]  # `echo` alone matches `echo *`; only pwd matched just `*`


@pytest.mark.anyio
async def test_path_rules_follow_globs_and_symlinks(real: Project) -> None:
    (real.root / "secrets").mkdir()
    (real.root / "secrets" / "key").write_text("hunter2\n")
    (real.root / "link").symlink_to(real.root / "secrets" / "key")
    (real.root / "notes.txt").write_text("fine\n")
    (real.root / ".env").write_text("TOKEN=x\n")
    real.agent(
        "reader",
        tools="'Read, Write(src/**)'",
        disallowed_tools="'Read(secrets/**), Read(*.env)'",
    )
    calls = [
        {"name": "Read", "arguments": {"file_path": "notes.txt"}},
        {"name": "Read", "arguments": {"file_path": "secrets/key"}},
        {"name": "Read", "arguments": {"file_path": "link"}},
        {"name": "Read", "arguments": {"file_path": ".env"}},
        {"name": "Write", "arguments": {"file_path": "src/deep/a.txt", "content": "a"}},
        {"name": "Write", "arguments": {"file_path": "top.txt", "content": "b"}},
    ]
    model = ScriptedModel({"agents": {"reader": [{"tool_calls": calls}, {"text": "ok"}]}})
    async with real.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("reader", "read"))
    codes = _codes(model)
    assert codes == [None, "tool-call-denied", "tool-call-denied", "tool-call-denied", None,
                     "approval-unavailable"]  # fmt: skip
    assert "hunter2" not in "".join(m.content for m in _results(model))
    assert (real.root / "src" / "deep" / "a.txt").read_text() == "a"
    assert not (real.root / "top.txt").exists()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("mode", "codes"),
    [
        ("acceptEdits", [None, "approval-unavailable", "tool-call-denied"]),
        ("dontAsk", ["tool-call-denied", "tool-call-denied", "tool-call-denied"]),
        ("bypassPermissions", [None, None, "tool-call-denied"]),
    ],
)
async def test_permission_modes_answer_asks_before_the_host(
    real: Project, mode: str, codes: list[str | None]
) -> None:
    real.agent(
        "editor",
        tools="'Write(src/**), Bash(echo:*)'",
        disallowed_tools="'Bash(rm:*)'",
        permission=mode,
    )
    calls = [
        {"name": "Write", "arguments": {"file_path": "top.txt", "content": "x"}},
        {"name": "Bash", "arguments": {"command": "touch made"}},
        {"name": "Bash", "arguments": {"command": "rm -f top.txt"}},
    ]
    model = ScriptedModel({"agents": {"editor": [{"tool_calls": calls}, {"text": "ok"}]}})
    async with real.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("editor", "edit"))
    assert _codes(model) == codes


@pytest.mark.anyio
async def test_plan_mode_leaves_every_mutating_tool_out(real: Project) -> None:
    real.agent("planner", tools="[Read, Bash, Write]", permission="plan")
    model = ScriptedModel({"agents": {"planner": _bash("touch x")}})
    async with real.runtime(model) as runtime:
        explained = _explain(real, "planner")
        await runtime.run(SubagentStartRequest("planner", "plan"))
    assert explained["tools"]["callable"] == ["Read"]
    assert explained["tools"]["left_out"]["Bash"] == "permission mode plan"
    assert explained["tools"]["left_out"]["Write"] == "permission mode plan"
    assert _codes(model) == ["tool-not-visible"]
    assert not (real.root / "x").exists()


@pytest.mark.anyio
async def test_an_inheriting_child_is_held_to_its_parents_rules(real: Project) -> None:
    real.agent("lead", tools="'Bash(echo:*)'", allowed_subagents="[kid]")
    real.agent("kid", tools="inherit")
    model = ScriptedModel(
        {
            "agents": {
                "lead": [
                    {"tool_calls": [{"name": "Task", "arguments": {"agent": "kid", "task": "go"}}]},
                    {"text": "delegated"},
                ],
                "kid": _bash("echo fine", "touch escaped"),
            }
        }
    )
    async with real.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("lead", "lead"))
    kid = next(r for r in model.requests if r.agent == "kid" and len(r.messages) > 2)
    codes = [
        json.loads(m.content)["error"]["code"] if m.is_error else None
        for m in kid.messages
        if m.role == "tool"
    ]
    assert codes == [None, "approval-unavailable"]
    assert not (real.root / "escaped").exists()
