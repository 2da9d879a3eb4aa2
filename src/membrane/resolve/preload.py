"""Skills a definition preloads: a Claude Code or pi file's ``skills`` list puts each named
skill's instructions into the agent's system prompt from its first turn, as those products do.

Pure: the texts were read by the caller into ``Deployment.skill_texts``
(``membrane.agents.skills.preload_texts``); this module decides which of them the agent gets
and what to say about the others.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from membrane.agents.definition import AgentDefinition
from membrane.agents.dialect import PRELOADS_SKILLS

__all__ = ["preloaded_skills"]


def preloaded_skills(
    definition: AgentDefinition,
    *,
    installed: Collection[str],
    texts: Mapping[str, str],
    isolated: bool,
) -> tuple[dict[str, str], list[str]]:
    """The preloaded skills (name -> instructions, in the file's order) and the warnings:
    ``installed`` names the discovered skills, ``texts`` holds the instructions read."""
    names = definition.skills
    if definition.dialect not in PRELOADS_SKILLS or not isinstance(names, tuple):
        return {}, []
    where = definition.path + (
        f":{definition.lines['skills']}" if "skills" in definition.lines else ""
    )
    if isolated:
        return {}, [f"{where}: isolated: true preloads no skills; `skills` is ignored"]
    chosen: dict[str, str] = {}
    warnings: list[str] = []
    for name in names:
        if name == "*":
            continue
        if name not in installed:
            warnings.append(
                f"{where}: `skills` names {name!r}, which no skill root holds: nothing is "
                "preloaded for it (see `membrane skills list`)"
            )
        elif name not in texts:
            warnings.append(f"{where}: the SKILL.md of skill {name!r} could not be read")
        else:
            chosen[name] = texts[name]
    return chosen, warnings
