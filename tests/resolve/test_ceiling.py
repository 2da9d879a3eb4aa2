"""Ceilings (DESIGN rule 13), resolved: what a parent's run took away, each with its source."""

from __future__ import annotations

from resolve_support import agent, builtins, deployment, extension_tools, mcp_tools

from membrane.resolve import CallParams, ParentContext, resolve
from membrane.resolve.ceiling import Ceiling, ceiling_of_run
from membrane.tools.rules import Condition, PermissionRule


def _tools() -> dict[str, object]:
    return {**builtins(), **extension_tools("lint", ["lint_run"]), **mcp_tools("bank", ["pay"])}


def test_a_parents_excluded_extension_and_denied_server_stay_out_below_it() -> None:
    lead = agent("lead", exclude_extensions=["lint"], disallowed_tools=["mcp__bank__*"])
    below = ceiling_of_run(Ceiling(), lead, by="run-1", mode="default")
    child = agent(tools=["Read", "ext:lint", "mcp__bank__pay"], extensions=["lint", "bank"])
    tools = _tools()
    deploy = deployment(extensions={"lint": extension_tools("lint", ["lint_run"]),
                                    "bank": mcp_tools("bank", ["pay"])})  # fmt: skip
    free = resolve(child, CallParams(), ParentContext(tools=tools), deploy)
    held = resolve(child, CallParams(), ParentContext(tools=tools, ceiling=below), deploy)
    assert {"lint_run", "mcp__bank__pay"} <= set(free.callable)
    assert held.left_out["lint_run"] == "ceiling:run-1"
    assert held.left_out["mcp__bank__pay"] == "ceiling:run-1"
    assert held.callable == ("Read",)


def test_a_star_in_disallowed_tools_denies_every_builtin_below_and_a_ceiling_never_rises() -> None:
    first = ceiling_of_run(Ceiling(), agent("a", disallowed_tools=["*"]), by="r1", mode="plan")
    second = ceiling_of_run(
        first, agent("b", permission="bypassPermissions", network=False), by="r2", mode="plan"
    )
    assert second.mode == "plan" and second.mode_source == "r1"
    assert {token for token, _ in second.denied} >= {"Bash", "Write", "Edit", "Read"}
    assert second.network is False and second.network_source == "r2"
    assert Ceiling.from_json(second.to_json(), where="test") == second
    child = agent(tools=["Read", "Bash"], network=True, permission="bypassPermissions")
    held = resolve(child, CallParams(), ParentContext(tools=builtins(), ceiling=second),
                   deployment())  # fmt: skip
    assert held.callable == ()
    assert held.network.value is False and held.network.source == "ceiling:r2"
    assert held.invocation["permission"].source == "ceiling:r1"


def test_a_stored_ceiling_reads_back_with_its_argument_rules_and_their_conditions() -> None:
    rule = PermissionRule(
        tool="send_money",
        pattern=None,
        verdict="allow",
        text="send_money(amount <= 100)",
        source="rules",
        conditions=(
            Condition("amount", "max", 100),
            Condition("recipient", "one_of", ("alice", "bob")),
        ),
        reason="at most 100",
    )
    grant = PermissionRule(tool="Bash", pattern="git log:*", verdict="allow", grants=True)
    lead = agent("lead", rules=(rule, grant))
    below = ceiling_of_run(Ceiling(), lead, by="r1", mode="default")
    assert below.held_rules == (rule,)  # a grant is the run's own, never a ceiling
    assert Ceiling.from_json(below.to_json(), where="test") == below
