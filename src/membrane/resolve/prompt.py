"""The child's system prompt and task prefix, from named sections resolved most-specific-wins.

Two axes stay apart (seed 003 section 3): ``prompt_mode`` decides the system prompt;
``inherit_context`` decides a text prefix for the task. Guidance is written from the resolved
tools, never from the definition's tokens, so the prompt cannot promise a tool the view lacks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from membrane.resolve.guidance import CLI_GUIDANCE_SECTION, WRITE_BOUNDARY_SECTION
from membrane.vocabulary import DELEGATION_TOOLS

__all__ = [
    "DelegationEntry",
    "MemoryNote",
    "PromptSection",
    "TranscriptEntry",
    "compose_system_prompt",
    "persona_section",
    "render_parent_context",
    "resolve_sections",
]


class TranscriptEntry(Protocol):
    """What ``inherit_context`` reads of a parent message (``membrane.models.Message`` fits)."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...

    @property
    def kind(self) -> str: ...


@dataclass(frozen=True, slots=True)
class PromptSection:
    """One named contribution. ``scope`` is ``global`` (the deployment) or ``child``."""

    name: str
    text: str
    scope: Literal["global", "child"] = "child"


@dataclass(frozen=True, slots=True)
class DelegationEntry:
    """One line of the delegation catalog: a subagent this child may start."""

    name: str
    tools: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class MemoryNote:
    scope: str
    path: str | None
    text: str
    read_only: bool


def resolve_sections(
    global_sections: Iterable[PromptSection], child_sections: Iterable[PromptSection]
) -> dict[str, PromptSection]:
    """Most-specific-wins by name: a child section shadows the global one of the same name,
    keeping the global position; an empty child section shadows it with nothing."""
    resolved: dict[str, PromptSection] = {s.name: s for s in global_sections}
    for section in child_sections:
        resolved[section.name] = section
    return resolved


def persona_section(deployment: str | None, child: object) -> PromptSection | None:
    """``deployment:persona`` resolved most-specific-wins: a child shadow (a string,
    possibly empty) beats the global one; anything else leaves the global in place."""
    global_layer = (
        [PromptSection("deployment:persona", deployment, "global")]
        if deployment is not None
        else []
    )
    child_layer = (
        [PromptSection("deployment:persona", child, "child")] if isinstance(child, str) else []
    )
    return resolve_sections(global_layer, child_layer).get("deployment:persona")


def render_parent_context(transcript: Sequence[TranscriptEntry]) -> str:
    """The parent's user and assistant text and compaction summaries, as a task prefix.

    Tool results (role ``tool``) and non-text content are skipped; an assistant turn that only
    called tools has no text and is skipped too. Empty when nothing is left.
    """
    blocks: list[str] = []
    for message in transcript:
        content = message.content
        if message.role == "tool" or not isinstance(content, str) or not content.strip():
            continue
        if getattr(message, "kind", "text") == "summary":
            label = "Summary of the earlier conversation"
        elif message.role == "user":
            label = "User"
        elif message.role == "assistant":
            label = "Assistant"
        else:
            continue
        blocks.append(f"[{label}]\n{content.strip()}")
    if not blocks:
        return ""
    return (
        "<parent_context>\n"
        "The conversation of the agent that started you, for context only. "
        "Your task follows after it.\n\n" + "\n\n".join(blocks) + "\n</parent_context>\n\n"
    )


def _tools_section(callable_tools: Mapping[str, bool], *, writes: bool) -> str:
    """The tool guidance. ``writes`` is the one decision the sandbox follows too: whether the
    working folder is writable (``EffectiveAuthority.writes``). Without it ``Bash`` runs with
    the folder read-only, and the child is told so rather than that Bash can change files."""
    if not callable_tools:
        return "# Tools\nYou have no tools. Answer from the task and the context you were given."
    mutating = sorted(n for n, m in callable_tools.items() if m)
    names = ", ".join(sorted(callable_tools))
    shell = not writes and "Bash" in callable_tools
    if shell:
        mutating = [n for n in mutating if n != "Bash"]
        read_only = (
            "Bash runs commands, but your working folder is read-only to them: a command "
            "cannot change your files."
        )
        if mutating:
            framing = (
                f"You can change state with {', '.join(mutating)}; change only what the task "
                f"needs. {read_only} Report what should change in your files instead."
            )
        else:
            framing = (
                f"You cannot change files: {read_only} Report what should change instead of "
                "changing it."
            )
    elif mutating:
        framing = (
            f"You can change files and state with {', '.join(mutating)}. "
            "Change only what the task needs, inside your working folder."
        )
    else:
        framing = (
            "You cannot change files: every tool you have only reads. "
            "Report what should change instead of changing it."
        )
    return f"# Tools\nYour tools: {names}.\n{framing}"


def _delegation_section(
    entries: Sequence[DelegationEntry],
    *,
    tools: Sequence[str],
    at_cap: bool,
    max_depth: int | None,
) -> str:
    follow = [t for t in tools if t != "Task"]
    how = "Start one with Task" + (f", then follow it with {', '.join(follow)}." if follow else ".")
    lines = ["# Subagents", how]
    lines += [
        f"- {e.name}: tools {e.tools}" + (f". {e.description}" if e.description else "")
        for e in entries
    ]
    if at_cap:
        lines.append(
            f"You are at the delegation depth cap (max_depth = {max_depth}): "
            "a start will be rejected with an error result."
        )
    return "\n".join(lines)


def _memory_section(note: MemoryNote) -> str:
    where = f" in {note.path}" if note.path else ""
    how = (
        "You can read it but not change it."
        if note.read_only
        else "Keep it current: record what a later run of this agent should know."
    )
    head = f"# Memory\nYour persistent memory ({note.scope} scope) is kept{where}. {how}"
    if not note.text.strip():
        return head + "\nIt is empty so far."
    return f"{head}\n<memory>\n{note.text.strip()}\n</memory>"


def compose_system_prompt(
    *,
    mode: str,
    agent: str,
    description: str,
    body: str,
    parent_system_prompt: str,
    working_folder: str,
    environment: Sequence[str],
    persona: PromptSection | None,
    callable_tools: Mapping[str, bool],
    skills: Mapping[str, str] | None,
    delegation: Sequence[DelegationEntry] | None,
    at_cap: bool,
    max_depth: int | None,
    memory: MemoryNote | None,
    extension_prompts: Mapping[str, str],
    cli_guidance: str = "",
    write_boundary: str = "",
    writes: bool = True,
    preloaded: Mapping[str, str] | None = None,
) -> tuple[str, tuple[PromptSection, ...]]:
    """Assemble the system prompt; returns it and the sections it is made of, in order.

    ``replace``: persona, active-agent tag, environment, guidance, extension sections, body.
    ``preloaded`` (skill name -> its instructions) adds one ``skill:NAME`` section per skill a
    Claude Code or pi file preloads, after the ``# Skills`` catalog.
    ``cli_guidance`` (for an agent with a shell) and ``write_boundary`` (for a worktree child)
    come right after the tool guidance when given.
    ``append``: the parent's system prompt verbatim, a bridge naming the child's working
    folder, then the same child sections with the body under ``<agent_instructions>``.

    The persona control governs the child's own ``deployment:persona`` section. A child
    shadow is that section in both modes, an empty one included (seed 001: an empty string
    shadows with an empty section), so ``sections`` shows it. In ``append`` the global persona
    is not repeated: the parent's prompt is copied verbatim (seed 003), persona and all, and
    no shadow edits the parent's text. Empty sections add nothing to the joined prompt.
    """
    active = f'<active_agent name="{agent}">\nYou are the subagent "{agent}".'
    if description:
        active += f" {description}"
    active += "\n</active_agent>"
    env = "\n".join(["# Environment", f"- Working folder: {working_folder}", *environment])
    sections: list[PromptSection] = []
    if mode == "append":
        if parent_system_prompt:
            sections.append(PromptSection("parent:system", parent_system_prompt))
        sections.append(
            PromptSection(
                "agent:bridge",
                "# Subagent\nThe instructions above belong to the agent that started you. "
                f"You now work as the subagent {agent!r} on the task you are given. "
                f"Your working folder is {working_folder}; where the instructions above name "
                "another folder, that folder is the parent's, not yours.",
            )
        )
        if persona is not None and persona.scope == "child":
            sections.append(persona)
    elif persona is not None and (persona.text or persona.scope == "child"):
        sections.append(persona)
    sections.append(PromptSection("agent:active", active))
    sections.append(PromptSection("agent:environment", env))
    sections.append(PromptSection("agent:tools", _tools_section(callable_tools, writes=writes)))
    if write_boundary:
        sections.append(PromptSection(WRITE_BOUNDARY_SECTION, write_boundary))
    if cli_guidance:
        sections.append(PromptSection(CLI_GUIDANCE_SECTION, cli_guidance))
    if skills is not None:
        listing = "\n".join(f"- {n}: {d}" if d else f"- {n}" for n, d in sorted(skills.items()))
        sections.append(
            PromptSection(
                "agent:skills",
                "# Skills\nLoad a skill with the Skill tool when the task matches it.\n"
                + (listing or "No skills are installed."),
            )
        )
    for name, text in (preloaded or {}).items():
        sections.append(
            PromptSection(f"skill:{name}", f"# Preloaded Skill: {name}\n\n{text.strip()}")
        )
    if delegation is not None:
        sections.append(
            PromptSection(
                "agent:delegation",
                _delegation_section(
                    delegation,
                    tools=[n for n in DELEGATION_TOOLS if n in callable_tools],
                    at_cap=at_cap,
                    max_depth=max_depth,
                ),
            )
        )
    if memory is not None:
        sections.append(PromptSection("agent:memory", _memory_section(memory)))
    for name in sorted(extension_prompts):
        text = extension_prompts[name].strip()
        if text:
            sections.append(PromptSection(f"extension:{name}", text, "global"))
    if mode == "append":
        sections.append(
            PromptSection(
                "agent:body", f"<agent_instructions>\n{body.strip()}\n</agent_instructions>"
            )
        )
    elif body.strip():
        sections.append(PromptSection("agent:body", body.strip()))
    return "\n\n".join(s.text for s in sections if s.text), tuple(sections)
