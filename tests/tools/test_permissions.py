"""Permission rules at the view: pattern matching, and the gate every call passes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from membrane.errors import ApprovalUnavailable, ToolCallDenied, ToolSpecError
from membrane.lowlevel import PermissionGate, PermissionRule
from membrane.tools.permissions import command_matches, parse_rule, path_matches
from membrane.tools.registry import ToolRegistry
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext


@pytest.mark.parametrize(
    ("pattern", "command", "expected"),
    [
        ("git log:*", "git log", True),
        ("git log:*", "git log --oneline -3", True),
        ("git log:*", "git logs", False),
        ("git log:*", "git", False),
        ("git *", "git", True),
        ("git *", "git status", True),
        ("git *", "gitk", False),
        ("git push * --force*", "git push origin --force-with-lease", True),
        ("npm test", "npm test", True),
        ("npm test", "npm test --watch", False),
        ("echo ?", "echo a", True),
    ],
)
def test_command_patterns(pattern: str, command: str, expected: bool) -> None:
    assert command_matches(pattern, command) is expected


@pytest.mark.parametrize(
    ("pattern", "relative", "expected"),
    [
        ("src/**", "src/a/b.py", True),
        ("src/**", "src", True),
        ("src/**", "srcx/a.py", False),
        ("src/*.py", "src/a/b.py", False),
        ("*.env", "deep/down/.env", True),
        ("*.env", "deep/down/env", False),
        ("*.env", "deep/prod.env", True),
        (".env", "deep/.env", True),
        ("docs/", "docs/x.md", True),
        ("/src/**", "src/x", True),
    ],
)
def test_path_patterns(pattern: str, relative: str, expected: bool) -> None:
    assert path_matches(pattern, relative, "/p/" + relative, home="/h") is expected


def test_absolute_and_home_patterns() -> None:
    assert path_matches("//etc/**", None, "/etc/passwd", home="/h")
    assert path_matches("~/.ssh/**", None, "/h/.ssh/id", home="/h")
    assert not path_matches("~/.ssh/**", None, "/x/.ssh/id", home="/h")
    assert not path_matches("src/**", None, "/elsewhere/src/a", home="/h")


@pytest.mark.parametrize(
    ("token", "parsed"),
    [("Bash", ("Bash", None)), ("Bash(git log:*)", ("Bash", "git log:*")),
     ("Bash()", None), ("(x)", None), ("Bash(x", None)],
)  # fmt: skip
def test_parse_rule(token: str, parsed: tuple[str, str | None] | None) -> None:
    assert parse_rule(token) == parsed


def _bash() -> Tool:
    async def handler(arguments: Any, context: ToolContext) -> str:
        return f"ran {arguments['command']}"

    schema = {"type": "object", "properties": {"command": {"type": "string"}}}
    return Tool(name="Bash", description="", input_schema=schema, handler=handler, mutating=True)


def _scope(gate: PermissionGate) -> Scope:
    registry = ToolRegistry()
    registry.register(_bash())
    scope = Scope(registry, name="child")
    scope.guard(gate)
    return scope


@pytest.mark.anyio
async def test_every_call_through_the_view_meets_the_gate(tmp_path: Path) -> None:
    rules = [PermissionRule("Bash", "echo *", "allow", "Bash(echo *)", "tools", grants=True)]
    scope = _scope(PermissionGate(rules, by_rules={"Bash"}))
    context = ToolContext(cwd=tmp_path)
    view = scope.view()
    assert await view.call("Bash", {"command": "echo hi"}, context) == "ran echo hi"
    with pytest.raises(ApprovalUnavailable) as caught:
        await view.call("Bash", {"command": "echo hi; curl x"}, context)
    assert caught.value.data["subject"] == "curl x"
    # The view a later resolution produces carries the same gate (Code Mode calls through it).
    scope.add_local(dataclasses.replace(_bash(), name="Other"))
    with pytest.raises(ApprovalUnavailable):
        await scope.view().call("Bash", {"command": "ls"}, context)


@pytest.mark.anyio
async def test_a_deny_rule_names_itself_and_a_refusing_approver_denies(tmp_path: Path) -> None:
    rules = [
        PermissionRule("Bash", None, "ask", "Bash", "ask_tools"),
        PermissionRule("Bash", "rm:*", "deny", "Bash(rm:*)", "disallowed_tools"),
    ]
    answers: list[str | None] = []

    def approver(request: Any) -> bool:
        answers.append(request.subject)
        return False

    view = _scope(PermissionGate(rules, approver=approver)).view()
    context = ToolContext(cwd=tmp_path)
    with pytest.raises(ToolCallDenied) as denied:
        await view.call("Bash", {"command": "rm -rf /"}, context)
    assert denied.value.data["rule"] == "Bash(rm:*)"
    with pytest.raises(ToolCallDenied, match="refused"):
        await view.call("Bash", {"command": "ls"}, context)
    assert answers == ["ls"]


def test_a_scope_takes_one_gate() -> None:
    scope = _scope(PermissionGate([]))
    with pytest.raises(ToolSpecError):
        scope.guard(PermissionGate([]))
