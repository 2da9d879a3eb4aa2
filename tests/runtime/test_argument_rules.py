"""Argument rules on any tool: a host tool ``send_money(recipient, amount)`` held to ``amount``
bounds and a list of recipients, through the real runtime; the model is the only double."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import pytest

from membrane.agents.catalog import Catalog
from membrane.config.load import load_settings
from membrane.config.values import Settings
from membrane.errors import ApprovalUnavailable, InvalidRequest, SettingsError, ToolCallDenied
from membrane.lowlevel import PermissionGate
from membrane.resolve import CallParams, Deployment, ParentContext, resolve
from membrane.runtime import SubagentStartRequest
from membrane.testing import ScriptedModel
from membrane.tools.argument_rules import read_argument_rules
from membrane.tools.permissions import ApprovalRequest
from membrane.tools.registry import ToolRegistry
from membrane.tools.rules import PermissionRule
from membrane.tools.scope import Scope
from membrane.tools.spec import Tool, ToolContext

from .conftest import Project, tool_results

pytestmark = pytest.mark.anyio

PAYER = """---
name: payer
description: Pays people.
tools: [send_money, Write, mcp__bank__refund]
rules:
  - tool: send_money
    allow:
      amount: {min: 0, max: 100}
      recipient: {one_of: [alice, bob]}
    reason: up to 100, to alice or bob
  - tool: send_money
    deny:
      recipient: {regex: '.*@evil\\.com'}
    reason: never pay evil.com
  - tool: write
    deny:
      file_path: {glob: '*.sh'}
  - tool: mcp__bank__refund
    ask:
      amount: {min: 1000}
---
Pay.
"""


@pytest.fixture
def payer(project: Project) -> tuple[Project, list[dict[str, Any]]]:
    paid: list[dict[str, Any]] = []

    async def send_money(arguments: Mapping[str, Any], context: ToolContext) -> str:
        paid.append(dict(arguments))
        return "sent"

    schema = {
        "type": "object",
        "properties": {"recipient": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["recipient", "amount"],
    }
    project.registry.register(
        Tool("send_money", "Send money.", schema, send_money, origin="host", mutating=True)
    )
    refund = Tool("mcp__bank__refund", "Refund.", schema, send_money, origin="mcp:bank")
    project.registry.register(refund)
    folder = project.root / ".membrane" / "agents"
    folder.mkdir(parents=True)
    (folder / "payer.md").write_text(PAYER, encoding="utf-8")
    return project, paid


def _pay(*calls: tuple[str, object]) -> list[dict[str, Any]]:
    return [
        {"name": "send_money", "arguments": {"recipient": recipient, "amount": amount}}
        for recipient, amount in calls
    ]


async def _run(project: Project, calls: list[dict[str, Any]], **options: Any) -> list[Any]:
    model = ScriptedModel({"agents": {"payer": [{"tool_calls": calls}, {"text": "done"}]}})
    async with project.runtime(model, **options) as runtime:
        await runtime.run(SubagentStartRequest("payer", "pay"))
    return [
        json.loads(m.content)["error"] if m.is_error else None for m in tool_results(model, "payer")
    ]


def _explain(project: Project) -> dict[str, Any]:
    definition = project.catalog().dispatch("payer", child=False).definition
    tools = project.registry.tools()
    deployment = Deployment(settings=project.settings, registry_tools=tools)
    return resolve(definition, CallParams(), ParentContext(tools=tools), deployment).to_json()


async def test_a_host_tool_is_held_to_its_argument_rules(
    payer: tuple[Project, list[dict[str, Any]]],
) -> None:
    project, paid = payer
    calls = _pay(("alice", 50), ("alice", 500), ("mallory", 10), ("x@evil.com", 1), ("bob", 100))
    calls.append({"name": "Write", "arguments": {"file_path": "run.sh", "content": "x"}})
    for amount in (5000, 5):
        arguments = {"recipient": "dan", "amount": amount}
        calls.append({"name": "mcp__bank__refund", "arguments": arguments})
    errors = await _run(project, calls)
    assert [e and e["code"] for e in errors] == [
        None,
        "approval-unavailable",
        "approval-unavailable",
        "tool-call-denied",
        None,
        "tool-call-denied",
        "approval-unavailable",
        None,
    ]
    assert paid == [{"recipient": "alice", "amount": 50}, {"recipient": "bob", "amount": 100},
                    {"recipient": "dan", "amount": 5}]  # fmt: skip
    # The model is told the rule and its reason.
    assert "up to 100, to alice or bob" in errors[1]["message"]
    assert "never pay evil.com" in errors[3]["message"]


async def test_an_ask_goes_to_the_approver_with_the_rules_reason(
    payer: tuple[Project, list[dict[str, Any]]],
) -> None:
    project, paid = payer
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return request.arguments["amount"] == 500

    errors = await _run(project, _pay(("alice", 500), ("carol", 5)), approver=approver)
    assert [e and e["code"] for e in errors] == [None, "tool-call-denied"]
    assert paid == [{"recipient": "alice", "amount": 500}]
    assert [r.tool for r in asked] == ["send_money", "send_money"]
    assert "amount <= 100" in asked[0].reason and "up to 100" in asked[0].reason


async def test_settings_rules_hold_for_every_agent_and_explain_names_each_source(
    payer: tuple[Project, list[dict[str, Any]]],
) -> None:
    project, paid = payer
    rule = {"tool": "send_money", "deny": {"amount": {"min": 90}}, "reason": "big payments"}
    hidden = {"tool": "wire_transfer", "deny": {"amount": {"min": 1}}}
    project.settings = Settings(rules=(json.dumps(rule), json.dumps(hidden)))
    permissions = _explain(project)["permissions"]
    assert "wire_transfer" not in json.dumps(permissions)  # no rule names a hidden tool
    explained = permissions["tools"]["send_money"]
    assert [(r["verdict"], r["source"]) for r in explained["rules"]] == [
        ("allow", "rules"),
        ("deny", "rules"),
        ("deny", "settings"),
    ]
    assert explained["rules"][0]["conditions"][0] == {"argument": "amount", "test": "min",
                                                      "value": 0}  # fmt: skip
    assert explained["default"] == "ask"
    errors = await _run(project, _pay(("bob", 100), ("bob", 20)))
    assert [e and e["code"] for e in errors] == ["tool-call-denied", None]
    assert "big payments" in errors[0]["message"]
    assert paid == [{"recipient": "bob", "amount": 20}]


async def test_a_rule_the_settings_cannot_hold_is_a_settings_error(
    payer: tuple[Project, list[dict[str, Any]]],
) -> None:
    project, _ = payer
    for bad in ({"tool": "send_money", "deny": {"recipient": {"regex": "(unclosed"}}},
                {"tool": "send_money", "allow": {"amount": {"max": "ten"}}},
                {"tool": "send_money", "allow": {"amount": 1}, "deny": {"amount": 2}}):  # fmt: skip
        project.settings = Settings(rules=(json.dumps(bad),))
        with pytest.raises(SettingsError) as caught:
            _explain(project)
        assert caught.value.code == "settings-invalid"


def test_a_definition_whose_rules_cannot_be_read_is_refused(project: Project) -> None:
    folder = project.root / ".membrane" / "agents"
    folder.mkdir(parents=True)
    broken = PAYER.replace("{min: 0, max: 100}", "{at_most: 100}")
    (folder / "payer.md").write_text(broken, encoding="utf-8")
    catalog = project.catalog()
    assert "payer" not in {d.name for d in catalog.definitions().values()}
    [error] = catalog.errors
    assert error.code == "definition-invalid" and "`at_most` is not a test" in error.message


def test_both_settings_files_add_their_rules(project: Project) -> None:
    home = project.home
    (home / "config.toml").parent.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        '[[rules]]\ntool = "send_money"\ndeny = { amount = { min = 1000 } }\n'
    )
    (project.root / ".membrane").mkdir(exist_ok=True)
    (project.root / ".membrane" / "config.toml").write_text(
        '[[rules]]\ntool = "send_money"\nask = { recipient = { glob = "*@*" } }\n'
        'reason = "mail addresses are new"\n'
    )
    settings = load_settings(project=project.root, home=home)
    assert [json.loads(rule) for rule in settings.rules] == [
        {"tool": "send_money", "deny": {"amount": {"min": 1000}}},
        {"tool": "send_money", "ask": {"recipient": {"glob": "*@*"}},
         "reason": "mail addresses are new"},
    ]  # fmt: skip
    (project.root / ".membrane" / "config.toml").write_text('rules = "deny everything"\n')
    with pytest.raises(SettingsError):
        load_settings(project=project.root, home=home)


async def test_a_start_requests_rules_hold_for_its_run_and_survive_a_resume(
    payer: tuple[Project, list[dict[str, Any]]],
) -> None:
    project, paid = payer
    rules = [{"tool": "send_money", "deny": {"amount": {"min": 20}}, "reason": "small only"}]
    script = [
        {"tool_calls": _pay(("bob", 50))},
        {"text": "first"},
        {"tool_calls": _pay(("alice", 30), ("alice", 10))},
        {"text": "second"},
    ]
    model = ScriptedModel({"agents": {"payer": script}})
    async with project.runtime(model) as runtime:
        result = await runtime.run(SubagentStartRequest("payer", "pay", rules=rules))
        header = runtime.store.get_header(result.run_id)
        assert header is not None and header.meta["controls"]["rules"] == rules
        await runtime.resume(result.run_id, "pay more")
        await runtime.wait(result.run_id)
    errors = [
        json.loads(m.content)["error"] if m.is_error else None for m in tool_results(model, "payer")
    ]
    assert [e and e["code"] for e in errors] == ["tool-call-denied", "tool-call-denied", None]
    assert "small only" in errors[0]["message"]
    assert paid == [{"recipient": "alice", "amount": 10}]
    with pytest.raises(InvalidRequest) as caught:
        SubagentStartRequest("payer", "pay", rules=[{"tool": "send_money", "deny": {}}])
    assert caught.value.data["field"] == "rules"


async def test_dotted_paths_reach_into_objects_and_lists_are_read_item_by_item(
    tmp_path: Path,
) -> None:
    async def handler(arguments: Any, context: ToolContext) -> str:
        return "sent"

    registry = ToolRegistry()
    registry.register(Tool("send_mail", "Mail.", {"type": "object"}, handler, origin="host"))
    entries = [
        {"tool": "send_mail", "allow": {"to": {"glob": "*@corp.example"}}},
        {"tool": "send_mail", "deny": {"to": {"one_of": ["boss@corp.example"]}}},
        {"tool": "send_mail", "deny": {"meta.priority": {"min": 5}}, "reason": "no alarms"},
    ]
    rules = read_argument_rules(entries, source="rules", fail=_never)
    scope = Scope(registry, name="child")
    scope.guard(PermissionGate(rules))
    view, context = scope.view(), ToolContext(cwd=tmp_path)
    assert await view.call("send_mail", {"to": ["a@corp.example", "b@corp.example"]}, context)
    with pytest.raises(ApprovalUnavailable):  # one recipient outside: no allow rule admits it
        await view.call("send_mail", {"to": ["a@corp.example", "x@else.example"]}, context)
    with pytest.raises(ToolCallDenied):  # any recipient the deny rule names
        await view.call("send_mail", {"to": ["a@corp.example", "boss@corp.example"]}, context)
    with pytest.raises(ToolCallDenied, match="no alarms"):
        await view.call("send_mail", {"to": ["a@corp.example"], "meta": {"priority": 9}}, context)
    assert await view.call("send_mail", {"to": ["a@corp.example"], "meta": {"priority": 1}},
                           context)  # fmt: skip


def _never(problem: str, hint: str) -> NoReturn:
    raise AssertionError(problem)


INVITER = """---
name: inviter
description: Plans meetings.
tools: [create_event]
rules:
  - tool: create_event
    allow:
      participants: {one_of: [alice@corp.example, bob@corp.example], when_present: true}
    reason: only colleagues are invited
  - tool: create_event
    deny:
      location: {glob: 'http*', when_present: true}
      title: {regex: '(?i).*urgent.*'}
    reason: no urgent meetings behind a link
---
Plan.
"""


async def test_a_when_present_test_binds_only_the_calls_that_supply_its_argument(
    project: Project, tmp_path: Path
) -> None:
    made: list[dict[str, Any]] = []

    async def create_event(arguments: Mapping[str, Any], context: ToolContext) -> str:
        made.append(dict(arguments))
        return "created"

    project.registry.register(
        Tool("create_event", "Create an event.", {"type": "object"}, create_event, origin="host")
    )
    folder = project.root / ".membrane" / "agents"
    folder.mkdir(parents=True)
    (folder / "inviter.md").write_text(INVITER, encoding="utf-8")
    calls = [
        {"title": "Standup"},  # no participants: the allow test does not apply
        {"title": "Review", "participants": ["alice@corp.example"]},
        {"title": "Review", "participants": ["mallory@evil.example"]},  # asks
        {"title": "Urgent sync"},  # no location: the deny rule binds on its title alone
        {"title": "Urgent sync", "location": "http://evil.example"},
        {"title": "Urgent sync", "location": "Room 4"},
        {"title": "Lunch", "location": "http://menu.example"},
    ]
    script = [{"tool_calls": [{"name": "create_event", "arguments": a} for a in calls]}]
    model = ScriptedModel({"agents": {"inviter": [*script, {"text": "done"}]}})
    async with project.runtime(model) as runtime:
        await runtime.run(SubagentStartRequest("inviter", "plan"))
    errors = [
        json.loads(m.content)["error"] if m.is_error else None
        for m in tool_results(model, "inviter")
    ]
    assert [e and e["code"] for e in errors] == [
        None,
        None,
        "approval-unavailable",
        "tool-call-denied",
        "tool-call-denied",
        None,
        None,
    ]
    assert [m["title"] for m in made] == ["Standup", "Review", "Urgent sync", "Lunch"]
    # explain shows the form as written, and a definition read back from the cache keeps it.
    cache = tmp_path / "definitions.json"
    for _ in range(2):
        cached = Catalog(
            project=project.root, home=project.home, settings=project.settings, cache=cache
        )
        definition = cached.dispatch("inviter", child=False).definition
    assert definition == project.catalog().dispatch("inviter").definition
    tools = project.registry.tools()
    deployment = Deployment(settings=project.settings, registry_tools=tools)
    explained = resolve(definition, CallParams(), ParentContext(tools=tools), deployment)
    [allow, deny] = explained.to_json()["permissions"]["tools"]["create_event"]["rules"]
    assert allow["conditions"][0]["when_present"] is True
    assert "participants one of" in allow["rule"] and allow["rule"].endswith("when present)")
    assert "when_present" not in deny["conditions"][1]
    (folder / "broken.md").write_text(
        INVITER.replace("name: inviter", "name: broken").replace(
            "when_present: true}\n    reason: only", "when_present: maybe}\n    reason: only"
        ),
        encoding="utf-8",
    )
    catalog = project.catalog()
    [error] = catalog.errors
    assert error.code == "definition-invalid" and "`when_present` must be true or false" in (
        error.message
    )
    only_flag = [{"tool": "create_event", "allow": {"participants": {"when_present": True}}}]
    with pytest.raises(InvalidRequest, match="has no test"):
        SubagentStartRequest("inviter", "plan", rules=only_flag)


async def test_a_bash_rule_reads_commands_an_argument_rule_reads_the_text_and_the_stricter_wins(
    tmp_path: Path,
) -> None:
    """What docs/security.md says of the two kinds of rule: an argument rule on ``command``
    tests the text as written (no wrapper is seen through), a ``Bash(...)`` rule the commands
    bash runs; a call gets the more restrictive of their verdicts."""

    async def handler(arguments: Any, context: ToolContext) -> str:
        return "ran"

    registry = ToolRegistry()
    registry.register(Tool("Bash", "Run.", {"type": "object"}, handler, origin="builtin"))
    text_rules = read_argument_rules(
        [
            {"tool": "Bash", "deny": {"command": {"regex": "rm .*"}}},
            {"tool": "Bash", "ask": {"command": {"glob": "*--all*"}}},
        ],
        source="rules",
        fail=_never,
    )
    context = ToolContext(cwd=tmp_path)

    def view(*rules: PermissionRule) -> Any:
        scope = Scope(registry, name="child")
        scope.guard(PermissionGate((*text_rules, *rules)))
        return scope.view()

    alone = view()
    with pytest.raises(ToolCallDenied):
        await alone.call("Bash", {"command": "rm x"}, context)
    assert await alone.call("Bash", {"command": "env rm x"}, context)  # the text is not `rm ...`
    commands = view(PermissionRule("Bash", "rm:*", "deny", text="Bash(rm:*)"))
    with pytest.raises(ToolCallDenied, match=r"Bash\(rm:\*\)"):
        await commands.call("Bash", {"command": "env rm x"}, context)
    granted = view(PermissionRule("Bash", "git log:*", "allow", text="Bash(git log:*)"))
    assert await granted.call("Bash", {"command": "git log -1"}, context)
    with pytest.raises(ApprovalUnavailable):  # the pattern allows it, the argument rule asks
        await granted.call("Bash", {"command": "git log --all"}, context)
