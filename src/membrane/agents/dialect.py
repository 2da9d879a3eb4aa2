"""The dialect a definition file is written in, and the deployment's choices for it.

A small module of its own: finding and listing definitions names dialects without importing the
translations (``membrane.agents.translation``) that only parsing a file needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from membrane.config.values import DEFAULT_TOOLS, OmittedTools

__all__ = [
    "DIALECT_NAMES",
    "MEMBRANE",
    "OMITTED_SETTING",
    "PRELOADS_SKILLS",
    "WORKSPACE",
    "Dialect",
]

#: Every dialect, Membrane's own first.
DIALECT_NAMES: Final = ("membrane", "claude-code", "opencode", "pi", "codex", "copilot")
#: Dialects whose ``skills`` list preloads each named skill's instructions into the agent's
#: system prompt (Claude Code's and pi's meaning); in Membrane's own it only selects the skills
#: the ``Skill`` tool loads.
PRELOADS_SKILLS: Final = frozenset({"claude-code", "pi"})
#: The settings key that opts a dialect into its product's meaning of an omitted ``tools``.
OMITTED_SETTING: Mapping[str, str] = {
    "claude-code": "claude_code_omitted_tools",
    "opencode": "opencode_omitted_tools",
    "pi": "pi_omitted_tools",
    "codex": "codex_omitted_tools",
    "copilot": "copilot_omitted_tools",
}


@dataclass(frozen=True, slots=True)
class Dialect:
    """A dialect and the deployment's choices for it."""

    name: str = "membrane"
    omitted_tools: OmittedTools = "default"
    default_tools: tuple[str, ...] = DEFAULT_TOOLS
    #: Membrane's own fields, plus pi's spellings where Membrane gives a value no meaning of
    #: its own (``<workspace>/.agents/agents``, a folder pi reads too: seed 003).
    pi_spellings: bool = False


MEMBRANE: Final = Dialect()
#: ``<workspace>/.agents/agents``: Membrane's dialect, reading pi's spellings as pi does.
WORKSPACE: Final = Dialect(pi_spellings=True)
