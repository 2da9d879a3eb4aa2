"""The guidance a child is given about Membrane's CLI: one body, present only where it applies."""

from __future__ import annotations

from resolve_support import agent, builtins, deployment, run, tool

from membrane.resolve import CallParams, ParentContext
from membrane.resolve.guidance import (
    CLI_GUIDANCE_SECTION,
    SCHEDULE_ACTION,
    SCHEDULE_GUIDANCE,
    WRITE_BOUNDARY_SECTION,
    cli_guidance,
)


def section(authority: object, name: str) -> str | None:
    sections = {s.name: s.text for s in authority.prompt_sections}  # type: ignore[attr-defined]
    return sections.get(name)


def test_a_child_with_bash_gets_the_cli_guidance_and_one_without_does_not() -> None:
    shell = run(agent(tools=["Read", "Bash"]))
    assert section(shell, CLI_GUIDANCE_SECTION) == cli_guidance()
    assert cli_guidance() in shell.system_prompt
    for needle in ("command -v membrane", "$MEMBRANE_CLI_PATH", "$MEMBRANE_CLI_BIN_DIR/membrane"):
        assert needle in shell.system_prompt
    assert "membrane doctor" in shell.system_prompt
    assert "membrane actions list" in shell.system_prompt
    assert "yours to track" in shell.system_prompt
    # How an Agent Skill is laid out (seed 002).
    for needle in ("`<name>/SKILL.md`", "`references/`", "`scripts/`", "`assets/`"):
        assert needle in shell.system_prompt
    assert SCHEDULE_GUIDANCE not in shell.system_prompt
    reader = run(agent(tools=["Read", "Grep"]))
    assert section(reader, CLI_GUIDANCE_SECTION) is None
    assert "command -v membrane" not in reader.system_prompt
    denied = run(agent(tools=["Read", "Bash"], disallowed_tools=["bash"]))
    assert section(denied, CLI_GUIDANCE_SECTION) is None


def test_scheduled_work_guidance_is_added_only_when_the_child_can_schedule() -> None:
    parent = ParentContext(tools={**builtins(), SCHEDULE_ACTION: tool(SCHEDULE_ACTION)})
    scheduler = run(agent(tools=["inherit"]), parent=parent)
    text = section(scheduler, CLI_GUIDANCE_SECTION)
    assert text == cli_guidance(can_schedule=True)
    assert SCHEDULE_GUIDANCE in scheduler.system_prompt
    assert "host's local time zone" in scheduler.system_prompt
    plain = run(agent(tools=["inherit"]))
    assert section(plain, CLI_GUIDANCE_SECTION) == cli_guidance()


def test_a_worktree_child_is_told_its_write_boundary() -> None:
    worktree = run(agent(tools=["Read", "Edit"]), call=CallParams(isolation="worktree"))
    boundary = section(worktree, WRITE_BOUNDARY_SECTION)
    assert boundary is not None
    assert "only inside it" in boundary and "reading files outside it" in boundary
    assert worktree.checkout.path is not None and worktree.checkout.path in boundary
    assert section(run(agent(tools=["Read", "Edit"])), WRITE_BOUNDARY_SECTION) is None
    assert deployment().project == "/srv/project"
