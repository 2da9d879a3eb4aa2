"""System prompt and task prefix: modes, persona shadowing, parent context, memory, guidance."""

from __future__ import annotations

from resolve_support import agent, builtins, deployment, extension_tools, run, tool

from membrane.config.values import Settings
from membrane.models.base import Message, ToolCall
from membrane.resolve import CallParams, ParentContext, PromptSection

PARENT_PROMPT = "You are the lead. Work in /home/lead/repo and be brief."


def _parent(**more: object) -> ParentContext:
    fields: dict[str, object] = {"system_prompt": PARENT_PROMPT, **more}
    return ParentContext(tools=builtins(), **fields)  # type: ignore[arg-type]


def test_replace_mode_excludes_the_parent_prompt() -> None:
    authority = run(
        agent(body="Find TODO markers.", description="Finds markers."), parent=_parent()
    )
    assert authority.prompt_mode == "replace"
    system = authority.system_prompt
    assert PARENT_PROMPT not in system
    assert system.index('<active_agent name="worker">') < system.index("# Environment")
    assert system.index("# Environment") < system.index("Find TODO markers.")
    assert "Finds markers." in system
    assert "Working folder: /srv/project" in system


def test_append_mode_keeps_the_parent_prompt_verbatim_and_names_the_childs_folder() -> None:
    authority = run(agent(prompt_mode="append", body="Check the auth layer."), parent=_parent())
    system = authority.system_prompt
    assert system.startswith(PARENT_PROMPT + "\n\n")
    assert "Your working folder is /srv/project" in system
    assert "that folder is the parent's, not yours" in system
    assert system.endswith("<agent_instructions>\nCheck the auth layer.\n</agent_instructions>")
    names = [s.name for s in authority.prompt_sections]
    assert names[:3] == ["parent:system", "agent:bridge", "agent:active"]


def test_append_mode_with_an_empty_body_clones_only_the_system_prompt() -> None:
    transcript = (Message("user", "secret plan"),)
    authority = run(agent(prompt_mode="append"), parent=_parent(transcript=transcript))
    assert "secret plan" not in authority.system_prompt
    assert authority.task_prefix == ""


def test_deployment_persona_is_global_and_shadowable_per_child() -> None:
    deploy = deployment(settings=Settings(persona="Speak like a careful auditor."))
    assert "Speak like a careful auditor." in run(agent(), deploy=deploy).system_prompt
    shadowed = run(agent(), deploy=deploy, persona="Speak like a pirate.")
    assert "Speak like a pirate." in shadowed.system_prompt
    assert "careful auditor" not in shadowed.system_prompt
    emptied = run(agent(), deploy=deploy, persona="")
    assert "careful auditor" not in emptied.system_prompt
    assert emptied.system_prompt.startswith('<active_agent name="worker">')
    assert emptied.prompt_sections[0] == PromptSection("deployment:persona", "", "child")


def test_append_mode_keeps_the_parent_prompt_and_the_childs_own_persona_section() -> None:
    deploy = deployment(settings=Settings(persona="Deployment voice."))
    parent = _parent(system_prompt="Deployment voice.\n\nYou are the lead.")
    kept = run(agent(prompt_mode="append"), deploy=deploy, parent=parent)
    assert kept.system_prompt.count("Deployment voice.") == 1
    assert "deployment:persona" not in [s.name for s in kept.prompt_sections]
    for persona, text in (("Reviewer voice.", "Reviewer voice."), ("", "")):
        shadowed = run(agent(prompt_mode="append"), deploy=deploy, parent=parent, persona=persona)
        sections = {s.name: s for s in shadowed.prompt_sections}
        assert sections["deployment:persona"] == PromptSection("deployment:persona", text, "child")
        names = list(sections)
        assert names.index("agent:bridge") < names.index("deployment:persona")
        assert shadowed.system_prompt.startswith("Deployment voice.\n\nYou are the lead.\n\n")
        assert "\n\n\n\n" not in shadowed.system_prompt
    assert (
        "Reviewer voice."
        in run(
            agent(prompt_mode="append"), deploy=deploy, parent=parent, persona="Reviewer voice."
        ).system_prompt
    )


def test_inherit_context_renders_text_and_summaries_but_not_tool_results() -> None:
    transcript = (
        Message("assistant", "Earlier work, condensed.", kind="summary"),
        Message("user", "Please audit the service."),
        Message("assistant", "", tool_calls=(ToolCall("c1", "Grep", {"pattern": "TODO"}),)),
        Message("tool", "src/app.py:3: TODO secret-tool-output", tool_call_id="c1", name="Grep"),
        Message("assistant", "I found three markers."),
    )
    authority = run(
        agent(), call=CallParams(inherit_context=True), parent=_parent(transcript=transcript)
    )
    prefix = authority.task_prefix
    assert prefix.startswith("<parent_context>\n")
    assert prefix.endswith("</parent_context>\n\n")
    assert "[Summary of the earlier conversation]\nEarlier work, condensed." in prefix
    assert "[User]\nPlease audit the service." in prefix
    assert "[Assistant]\nI found three markers." in prefix
    assert "secret-tool-output" not in prefix
    assert prefix.index("condensed") < prefix.index("audit") < prefix.index("three markers")
    assert run(agent(), parent=_parent(transcript=transcript)).task_prefix == ""


def test_memory_is_injected_even_when_isolated() -> None:
    deploy = deployment(memory={"project": "The parser lives in src/parse.py."})
    authority = run(agent(memory="project", isolated=True), deploy=deploy)
    assert "<memory>\nThe parser lives in src/parse.py.\n</memory>" in authority.system_prompt
    assert "/srv/project/.membrane/memory/worker/MEMORY.md" in authority.system_prompt
    local = run(agent(memory="local"), deploy=deploy)
    assert ".membrane/memory.local/worker/MEMORY.md" in local.system_prompt
    assert "It is empty so far." in local.system_prompt


def test_an_extension_prompt_stays_when_its_tools_are_filtered_out() -> None:
    notes = extension_tools("notes", ["summarize"])
    deploy = deployment(
        extensions={"notes": notes, "metrics": extension_tools("metrics", ["count_lines"])},
        extension_prompts={"notes": "Notes: keep summaries short.", "metrics": "Metrics: count."},
    )
    authority = run(
        agent(tools=["Read"], disallowed_tools=["summarize"], exclude_extensions=["metrics"]),
        deploy=deploy,
    )
    assert "summarize" not in authority.callable
    assert "Notes: keep summaries short." in authority.system_prompt
    assert "Metrics: count." not in authority.system_prompt


def test_guidance_follows_the_resolved_tools() -> None:
    writer = run(agent(tools=["Read", "Edit"]))
    assert "You can change files and state with Edit." in writer.system_prompt
    denied = run(agent(tools=["Read", "Edit"], disallowed_tools=["edit"]))
    assert "You cannot change files" in denied.system_prompt
    assert "# Skills" not in writer.system_prompt
    parent = ParentContext(tools={**builtins(), "Skill": tool("Skill")})
    deploy = deployment(skills={"pdf": "Read PDF files.", "charts": "Draw charts."})
    skilled = run(agent(tools=["inherit"], skills=("pdf",)), parent=parent, deploy=deploy)
    assert "# Skills" in skilled.system_prompt
    assert "- pdf: Read PDF files." in skilled.system_prompt
    assert "charts" not in skilled.system_prompt


def test_the_delegation_catalog_prints_inherit_plus_extras() -> None:
    porter = agent("porter", tools=["inherit", "Bash"], description="Does chores.")
    scout = agent("scout", description="Finds things.")
    deploy = deployment(subagents={"porter": porter, "scout": scout})
    parent = ParentContext(
        tools={**builtins(), **{f"mcp__x__t{i}": tool(f"mcp__x__t{i}") for i in range(5)}}
    )
    authority = run(
        agent(allowed_subagents=["porter", "scout", "ghost"]), deploy=deploy, parent=parent
    )
    system = authority.system_prompt
    assert "- porter: tools inherit (+Bash). Does chores." in system
    assert "- scout: tools default (Read, Glob, Grep). Finds things." in system
    assert "- ghost: tools unknown (not in the catalog)" in system
    assert "mcp__x__t0" not in system


def test_the_delegation_catalog_says_whether_extension_tools_come_on_top() -> None:
    subs = {
        "plain": agent("plain"),
        "every": agent("every", extensions=True),
        "bare": agent("bare", extensions=False),
        "sealed": agent("sealed", isolated=True),
        "picky": agent("picky", extensions=("notes",)),
        "selector": agent("selector", tools=("Read", "ext:notes/summarize")),
    }
    system = run(
        agent(allowed_subagents=list(subs)), deploy=deployment(subagents=subs)
    ).system_prompt
    assert "- plain: tools default (Read, Glob, Grep)\n" in system
    assert (
        "- every: tools default (Read, Glob, Grep) + the tools of every loaded extension" in system
    )
    assert "- bare: tools default (Read, Glob, Grep)\n" in system
    assert "- sealed: tools default (Read, Glob, Grep)\n" in system
    assert "- picky: tools default (Read, Glob, Grep) + the tools of extensions notes" in system
    assert system.endswith("- selector: tools Read, ext:notes/summarize")
