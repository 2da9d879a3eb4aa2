"""The tool order: builtins, extension tools, inherit, memory, delegation, disallowed_tools."""

from __future__ import annotations

import dataclasses

import pytest
from resolve_support import (
    agent,
    assert_complete,
    builtins,
    deployment,
    extension_tools,
    mcp_tools,
    run,
    tool,
)

from membrane.config.values import Settings
from membrane.errors import InvalidDepth
from membrane.resolve import CallParams, ParentContext
from membrane.tools.restriction import Restriction
from membrane.tools.spec import Tool
from membrane.vocabulary import INHERIT_DENY_TOOLS

ALPHA = extension_tools("alpha", ["search", "fetch"])
BETA = extension_tools("beta", ["index"])


def test_omitted_tools_give_the_read_only_default_set() -> None:
    authority = run(agent())
    assert authority.callable == ("Glob", "Grep", "Read")
    assert authority.left_out == {n: "not selected" for n in ("Bash", "Edit", "Write")}
    assert "You cannot change files" in authority.system_prompt


def test_omitted_tools_get_no_extension_tool_unless_the_file_asks_for_one() -> None:
    """DESIGN rule 2: seed 000's read-only default holds whatever extensions are loaded; only
    ``extensions:`` written in the file or an ``ext:``/``mcp__`` selector brings their tools."""
    remote = {"push": tool("push", "extension:remote", mutating=True)}
    deploy = deployment(extensions={"alpha": ALPHA, "remote": remote})
    authority = run(agent(), deploy=deploy)
    assert authority.callable == ("Glob", "Grep", "Read")
    assert {authority.left_out[n] for n in ("fetch", "search", "push")} == {"not asked for"}
    assert authority.extensions_loaded == ("alpha", "remote")
    assert "You cannot change files" in authority.system_prompt
    asked = run(agent(extensions=["remote"]), deploy=deploy)
    assert asked.callable == ("Glob", "Grep", "Read", "push")
    assert asked.left_out["search"] == "extension not loaded"
    assert "You can change files" in asked.system_prompt
    selected = run(agent(tools=["Read", "ext:alpha/search"]), deploy=deploy)
    assert selected.callable == ("Read", "search")
    assert selected.left_out["push"] == "not selected"


def test_the_default_set_is_a_deployment_setting() -> None:
    deploy = deployment(settings=Settings(default_tools=("Read", "Bash")))
    assert run(agent(), deploy=deploy).callable == ("Bash", "Read")


def test_builtin_names_match_case_insensitively_and_unknown_tokens_warn() -> None:
    authority = run(agent(tools=["read", "GREP", "Bash(git:*)", "Frobnicate"]))
    assert authority.callable == ("Bash", "Grep", "Read")
    assert "tools: 'Frobnicate' is not a builtin tool or a selector; ignored" in authority.warnings
    assert any("'Bash(git:*)' grants Bash" in w for w in authority.warnings)


def test_star_means_the_assignable_builtins_not_the_parent_catalog() -> None:
    parent_tools = {**builtins(), "Skill": tool("Skill"), **mcp_tools("github", ["search"])}
    parent = ParentContext(tools=parent_tools)
    authority = run(agent(tools=["*"]), parent=parent)
    assert authority.callable == ("Bash", "Edit", "Glob", "Grep", "Read", "Write")
    assert authority.left_out == {
        "Skill": "not selected",
        "mcp__github__search": "extension not loaded",
    }


def test_tools_none_keeps_tools_of_loaded_extensions_and_says_so() -> None:
    silent = run(agent(tools=[]), deploy=deployment(extensions={"alpha": ALPHA}))
    assert silent.callable == ()
    assert silent.left_out["search"] == "not asked for"
    authority = run(
        agent(tools=[], extensions=True), deploy=deployment(extensions={"alpha": ALPHA})
    )
    assert authority.callable == ("fetch", "search")
    assert {authority.left_out[n] for n in ("Read", "Bash")} == {"not selected"}
    assert any(w.startswith("tools: none still lets tools") for w in authority.warnings)
    closed = run(agent(tools=[], extensions=False), deploy=deployment(extensions={"alpha": ALPHA}))
    assert closed.callable == ()
    assert closed.left_out["search"] == "extension not loaded"


def test_without_selectors_all_tools_of_loaded_extensions_surface() -> None:
    deploy = deployment(extensions={"alpha": ALPHA, "beta": BETA})
    authority = run(agent(extensions=["alpha"]), deploy=deploy)
    assert authority.extensions_loaded == ("alpha",)
    assert {"fetch", "search"} <= set(authority.callable)
    assert authority.left_out["index"] == "extension not loaded"


def test_a_selector_narrows_extension_tools_but_cannot_load_an_extension() -> None:
    deploy = deployment(extensions={"alpha": ALPHA, "beta": BETA})
    authority = run(
        agent(tools=["Read", "ext:alpha/search", "ext:beta"], extensions=["alpha"]), deploy=deploy
    )
    assert authority.callable == ("Read", "search")
    assert authority.left_out["fetch"] == "not selected"
    assert authority.left_out["index"] == "extension not loaded"


def test_exclude_extensions_beats_an_ext_selector() -> None:
    deploy = deployment(extensions={"alpha": ALPHA, "beta": BETA})
    authority = run(agent(tools=["Read", "ext:beta"], exclude_extensions=["beta"]), deploy=deploy)
    assert authority.extensions_loaded == ("alpha",)
    assert authority.extensions_excluded == ("beta",)
    assert authority.left_out["index"] == "extension excluded"
    assert "index" not in authority.callable


def test_disallowed_tools_beats_an_ext_name_tool_selector() -> None:
    deploy = deployment(extensions={"alpha": ALPHA})
    authority = run(
        agent(tools=["ext:alpha/search", "ext:alpha/fetch"], disallowed_tools=["search"]),
        deploy=deploy,
    )
    assert authority.callable == ("fetch",)
    assert authority.left_out["search"] == "disallowed_tools"
    assert not authority.restriction.admits(deploy.registry_tools["search"])


def test_mcp_selectors_pick_server_tools() -> None:
    github = mcp_tools("github", ["search", "create_issue"])
    deploy = deployment(extensions={"github": github, "alpha": ALPHA})
    one = run(agent(tools=["mcp__github__search"]), deploy=deploy)
    assert one.callable == ("mcp__github__search",)
    assert one.left_out["mcp__github__create_issue"] == "not selected"
    assert one.left_out["search"] == "not selected"
    every = run(
        agent(tools=["mcp__github__*"], disallowed_tools=["mcp__github__search"]), deploy=deploy
    )
    assert every.callable == ("mcp__github__create_issue",)
    assert every.left_out["mcp__github__search"] == "disallowed_tools"


def test_isolated_is_a_static_builtin_allowlist_even_with_selectors() -> None:
    deploy = deployment(extensions={"alpha": ALPHA})
    definition = agent(tools=["Read", "ext:alpha/search"], allowed_subagents=["scout"])
    authority = run(definition, call=CallParams(isolated=True), deploy=deploy)
    assert authority.callable == ("Read",)
    assert authority.extensions_loaded == ()
    assert authority.left_out["search"] == "isolated"
    assert authority.left_out["fetch"] == "isolated"
    assert authority.left_out["Task"] == "isolated"
    assert not authority.may_delegate
    assert any("select nothing" in w for w in authority.warnings)


def test_inherit_takes_the_parent_catalog_with_deferred_tools_minus_the_deny_list() -> None:
    deferred = mcp_tools("github", ["search", "create_issue"], deferred=True)
    host = {name: tool(name) for name in [*INHERIT_DENY_TOOLS, "Skill"]}
    parent_tools = {**builtins(), **deferred, **host}
    authority = run(agent(tools=["inherit"]), parent=ParentContext(tools=parent_tools))
    assert set(authority.callable) == {
        "Bash", "Edit", "Glob", "Grep", "Read", "Write", "Skill",
        "mcp__github__search", "mcp__github__create_issue",
    }  # fmt: skip
    assert authority.left_out == {name: "inherit deny list" for name in INHERIT_DENY_TOOLS}
    assert "github" in authority.extensions_loaded
    assert set(authority.inherited_local_tools) == {"Skill", *deferred}
    assert "# Skills" in authority.system_prompt


def test_inherit_extras_must_be_assignable() -> None:
    parent = ParentContext(tools={"Read": tool("Read"), "WebFetch": tool("WebFetch")})
    authority = run(agent(tools=["inherit", "Bash", "WebFetch", "Task"]), parent=parent)
    assert set(authority.callable) == {"Bash", "Read", "WebFetch"}
    assert authority.left_out["Edit"] == "not selected"
    assert any("'Task' is not assignable" in w for w in authority.warnings)
    narrow = run(agent(tools=["Read", "WebFetch"]), parent=parent)
    assert narrow.left_out["WebFetch"] == "not assignable"


def test_inherit_respects_extension_exclusion() -> None:
    parent_tools = {**builtins(), **mcp_tools("github", ["search"], deferred=True)}
    authority = run(
        agent(tools=["inherit"], exclude_extensions=["github"]),
        parent=ParentContext(tools=parent_tools),
    )
    assert authority.left_out["mcp__github__search"] == "extension excluded"


def test_a_builtin_definition_cannot_inherit() -> None:
    parent_tools = {**builtins(), "Skill": tool("Skill")}
    authority = run(
        agent(root="builtin", tools=["inherit"]), parent=ParentContext(tools=parent_tools)
    )
    assert authority.callable == ("Glob", "Grep", "Read")
    assert authority.left_out["Skill"] == "not selected"
    assert any("builtin definitions never inherit" in w for w in authority.warnings)
    with_extra = run(
        agent(root="builtin", tools=["inherit", "Bash"]), parent=ParentContext(tools=parent_tools)
    )
    assert with_extra.callable == ("Bash",)


def test_inherit_in_default_tools_never_reaches_a_definition_that_omits_tools() -> None:
    parent = ParentContext(tools={**builtins(), "Skill": tool("Skill")})
    deploy = deployment(settings=Settings(default_tools=("Read", "inherit")))
    authority = run(agent(), parent=parent, deploy=deploy)
    assert authority.callable == ("Read",)
    assert authority.left_out["Skill"] == "not selected"
    assert authority.left_out["Bash"] == "not selected"
    assert not authority.restriction.plan.inherit
    assert any(w.startswith("default_tools: 'inherit' is ignored") for w in authority.warnings)


@pytest.mark.parametrize("written", [["inherit"], ["INHERIT", " "]])
def test_a_builtin_definition_never_inherits_through_the_default_tools(
    written: list[str],
) -> None:
    parent = ParentContext(tools={**builtins(), "Skill": tool("Skill")})
    deploy = deployment(settings=Settings(default_tools=("inherit", "Grep")))
    authority = run(agent(root="builtin", tools=written), parent=parent, deploy=deploy)
    assert authority.callable == ("Grep",)
    assert authority.left_out["Skill"] == "not selected"
    assert not authority.restriction.plan.inherit
    assert "tools: inherit is ignored (builtin definitions never inherit); the default tools " \
        "(Grep) apply" in authority.warnings  # fmt: skip


def test_selectors_in_default_tools_only_narrow_extension_tools() -> None:
    deploy = deployment(
        extensions={"alpha": ALPHA, "beta": BETA},
        settings=Settings(default_tools=("Read", "ext:alpha/search")),
    )
    authority = run(agent(), deploy=deploy)
    assert authority.callable == ("Read", "search")
    assert authority.left_out["fetch"] == "not selected"
    assert authority.left_out["index"] == "not selected"


def test_unknown_default_tools_tokens_are_reported_under_default_tools() -> None:
    deploy = deployment(settings=Settings(default_tools=("Read", "Skill", "Frobnicate")))
    parent = ParentContext(tools={**builtins(), "Skill": tool("Skill")})
    warnings = run(agent(), deploy=deploy, parent=parent).warnings
    skill = next(w for w in warnings if "'Skill'" in w)
    assert skill.startswith("default_tools: 'Skill' is not assignable to a subagent")
    assert "inherit" not in skill
    assert "default_tools: 'Frobnicate' is not a builtin tool or a selector; ignored" in warnings
    assert not any(w.startswith("tools:") for w in warnings)
    written = run(agent(tools=["Read", "Skill"]), parent=parent).warnings
    assert any(w.startswith("tools: 'Skill' is not assignable") for w in written)


@pytest.mark.parametrize(
    "impostor",
    [tool("read"), tool("BASH", "scope"), tool("Bash", "scope"), tool("Write", "host")],
    ids=["lowercase-builtin-origin", "server-action", "scope-origin", "host-origin"],
)
def test_only_a_builtin_origin_tool_with_the_canonical_name_counts_as_a_builtin(
    impostor: Tool,
) -> None:
    base = deployment()
    deploy = dataclasses.replace(
        base, registry_tools={**base.registry_tools, impostor.name: impostor}
    )
    selecting = run(agent(tools=["read", "bash", "write"]), deploy=deploy)
    assert selecting.left_out[impostor.name] == "not selected"
    assert selecting.restriction.reason(impostor) == "not selected"
    # Through inherit it is one more parent tool, never a builtin.
    parent = ParentContext(tools={impostor.name: impostor})
    inheriting = run(agent(tools=["inherit"]), deploy=deploy, parent=parent)
    assert impostor.name in inheriting.callable


def test_disallowed_tools_removes_an_exactly_named_host_tool_and_the_builtin() -> None:
    host_read = tool("read", "scope")
    parent = ParentContext(tools={**builtins(), "read": host_read})
    authority = run(agent(tools=["inherit"], disallowed_tools=["read"]), parent=parent)
    assert authority.left_out["read"] == "disallowed_tools"
    assert authority.left_out["Read"] == "disallowed_tools"


def test_a_reserved_tool_is_neither_admitted_nor_inherited_for_being_reserved() -> None:
    run_code = tool("run_code", "scope", reserved=True)
    parent = ParentContext(tools={**builtins(), "run_code": run_code})
    authority = run(agent(tools=["inherit"]), parent=parent)
    assert "run_code" not in authority.callable
    assert "run_code" not in authority.left_out
    assert "run_code" not in authority.inherited_local_tools
    assert authority.restriction.reason(run_code) == "not selected"
    reserved_global = tool("Read", reserved=True)
    plain = run(agent(tools=["Grep"]))
    assert plain.restriction.reason(reserved_global) == "not selected"


def test_read_write_memory_adds_read_write_edit_and_read_only_memory_adds_read() -> None:
    writer = run(agent(tools=["Bash", "Write"], memory="project"))
    assert writer.callable == ("Bash", "Edit", "Read", "Write")
    reader = run(agent(tools=["Grep"], memory="project"))
    assert reader.callable == ("Grep", "Read")
    denied = run(agent(tools=["Write"], disallowed_tools=["write"], memory="project"))
    assert denied.callable == ("Read",)
    assert "You can read it but not change it." in denied.system_prompt


def test_delegation_tools_come_only_with_allowed_subagents() -> None:
    plain = run(agent())
    assert not set(plain.callable) & {"Task", "TaskWait"}
    nested = run(agent(allowed_subagents=["scout"]))
    assert {"Task", "TaskWait", "TaskList", "TaskStop"} <= set(nested.callable)
    assert nested.may_delegate
    assert nested.delegation_tools == ("Task", "TaskWait", "TaskList", "TaskStop", "TaskMessage")


def test_delegation_tools_stay_visible_at_the_depth_cap_with_a_warning() -> None:
    deploy = deployment(settings=Settings(max_depth=1))
    authority = run(agent(allowed_subagents=["scout"]), deploy=deploy)
    assert authority.depth == 1
    assert "Task" in authority.callable
    assert not authority.may_delegate
    assert any("every start it attempts is rejected" in w for w in authority.warnings)
    assert "a start will be rejected" in authority.system_prompt


def test_a_static_visibility_policy_hides_delegation_at_the_cap() -> None:
    deploy = deployment(settings=Settings(max_depth=2, hide_delegation_at_cap=True))
    parent = ParentContext(tools=builtins(), depth=1)
    authority = run(agent(allowed_subagents=["scout"]), deploy=deploy, parent=parent)
    assert authority.left_out["Task"] == "depth cap"
    assert authority.delegation_tools == ()
    below = run(agent(allowed_subagents=["scout"]), deploy=deploy)
    assert "Task" in below.callable


def test_a_top_level_agent_resolves_at_depth_zero_below_the_cap() -> None:
    deploy = deployment(settings=Settings(max_depth=1))
    authority = run(agent(allowed_subagents=["scout"]), deploy=deploy, depth=0)
    assert authority.depth == 0
    assert authority.may_delegate
    assert "Delegation depth: 0 of at most 1" in authority.system_prompt
    assert not any("every start it attempts" in w for w in authority.warnings)
    assert authority.with_filters(tool_filter=Restriction(deny=["Glob"])).depth == 0
    child = run(agent(allowed_subagents=["scout"]), deploy=deploy)
    assert child.depth == 1
    assert not child.may_delegate


@pytest.mark.parametrize(
    ("parent_depth", "depth"),
    [(0, -1), (0, 2**53), (0, True), (0, 1.0), (2**53 - 1, None), (-2, None), (False, None)],
)
def test_a_depth_outside_the_safe_non_negative_integers_is_rejected(
    parent_depth: object, depth: object
) -> None:
    with pytest.raises(InvalidDepth) as caught:
        parent = ParentContext(tools=builtins(), depth=parent_depth)  # type: ignore[arg-type]
        run(agent(), parent=parent, depth=depth)
    assert caught.value.code == "invalid-depth"


def test_provider_managed_depth_has_no_cap() -> None:
    deploy = deployment(settings=Settings(max_depth="provider-managed"))
    parent = ParentContext(tools=builtins(), depth=40)
    assert run(agent(allowed_subagents=["scout"]), deploy=deploy, parent=parent).may_delegate


def test_disallowed_tools_removes_delegation_too() -> None:
    authority = run(agent(allowed_subagents=["scout"], disallowed_tools=["Task"]))
    assert authority.left_out["Task"] == "disallowed_tools"
    assert not authority.may_delegate


@pytest.mark.parametrize("tools", [["Read"], ["inherit"], ["*"], []])
def test_filters_layer_their_own_reasons(tools: list[str]) -> None:
    authority = run(agent(tools=tools))
    narrowed = authority.with_filters(
        tool_filter=Restriction(deny=["Read"]),
        role=Restriction(allow=["Glob", "Read"], label="role"),
    )
    assert "Read" not in narrowed.callable
    if "Read" in authority.callable:
        assert narrowed.left_out["Read"] == "toolFilter"
    for name in set(authority.callable) - {"Read", "Glob"}:
        assert narrowed.left_out[name] == "role"
    assert_complete(narrowed, deployment().registry_tools)


def test_an_inheriting_child_never_gets_an_extension_tool_its_parent_lacks() -> None:
    # DESIGN rule 3: the parent excluded `github`, so its catalog lacks `gh_pr`; the child that
    # inherits gets the parent's catalog, not every loaded extension's tools.
    github = extension_tools("github", ["gh_pr"])
    deploy = deployment(extensions={"github": github})
    parent = ParentContext(tools=builtins())
    authority = run(agent(tools=["inherit"]), parent=parent, deploy=deploy)
    assert "gh_pr" not in authority.callable
    assert authority.left_out["gh_pr"] == "not selected"
    assert set(authority.callable) <= set(parent.tools)
    # A parent that holds the tool passes it on.
    holding = ParentContext(tools={**builtins(), **github})
    assert "gh_pr" in run(agent(tools=["inherit"]), parent=holding, deploy=deploy).callable
    # An explicit selector still asks for it, as a declared extra.
    asked = run(agent(tools=["inherit", "ext:github"]), parent=parent, deploy=deploy)
    assert "gh_pr" in asked.callable
