"""One argument-level permission rule as a definition or the settings hold it: the tool, the
pattern, the verdict (``membrane.tools.permissions`` explains and enforces them); and the
permission modes.

A module of its own, so that reading definitions (``membrane agents list``) and resolving a
child's permissions (``membrane explain``) need neither the tool model nor the matchers and
gates that enforce the rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from membrane.json_types import JSONDict

__all__ = [
    "NAME_RULE_TOOLS",
    "PERMISSION_MODES",
    "RULE_TOOLS",
    "VERDICTS",
    "PermissionRule",
    "Verdict",
]

Verdict = Literal["allow", "ask", "deny"]
VERDICTS: Final = ("allow", "ask", "deny")
#: Built-ins whose rules may carry a pattern, and the tools each one's rules govern.
RULE_TOOLS: Mapping[str, tuple[str, ...]] = {
    "Bash": ("Bash",),
    "Read": ("Read", "Glob", "Grep"),
    "Glob": ("Glob",),
    "Grep": ("Grep",),
    "Edit": ("Edit", "Write"),
    "Write": ("Write",),
}
#: Tools (not built-ins) whose rules may carry a glob over a name argument: ``Task`` over the
#: subagent it starts (OpenCode's ``permission.task``), matched case-insensitively.
NAME_RULE_TOOLS: Mapping[str, str] = {"Task": "agent"}
#: Permission modes (Claude Code's ``permissionMode``, Membrane's ``permission``); ``inherit``
#: follows the parent. ``plan`` leaves every mutating tool out; ``acceptEdits`` approves the
#: ``ask`` calls of ``Edit``/``Write``; ``dontAsk`` refuses every ``ask``; ``bypassPermissions``
#: approves every ``ask`` (``deny`` rules still hold). ``default`` sends each ``ask`` to the host.
PERMISSION_MODES: Final = ("default", "acceptEdits", "plan", "dontAsk", "bypassPermissions")


@dataclass(frozen=True, slots=True)
class PermissionRule:
    """One rule. ``tool`` is a built-in's canonical name or another tool's exact name; ``text``
    is the rule as written (``Bash(git log:*)``) and ``source`` where (``tools``,
    ``disallowed_tools``, ``ask_tools``, ``permission.bash``). ``grants``: the rule also
    grants its tool (a rule in ``tools``, OpenCode's ``allow``/``ask``), whose calls no rule
    matches then ask."""

    tool: str
    pattern: str | None
    verdict: Verdict
    text: str = ""
    source: str = ""
    grants: bool = False

    def governs(self, builtin: str) -> bool:
        """Whether this rule applies to calls of the built-in ``builtin``."""
        return builtin in RULE_TOOLS.get(self.tool, (self.tool,))

    def to_json(self) -> JSONDict:
        return {
            "tool": self.tool,
            "pattern": self.pattern,
            "verdict": self.verdict,
            "rule": self.text or self.tool,
            "source": self.source,
        }
