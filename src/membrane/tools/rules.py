"""One argument-level permission rule as a definition or the settings hold it: the tool, the
pattern, the verdict (``membrane.tools.permissions`` explains and enforces them).

A module of its own, so that reading definitions (``membrane agents list``) needs neither the
tool model nor the gates that enforce the rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from membrane._record import record
from membrane.json_types import JSONDict

__all__ = ["RULE_TOOLS", "VERDICTS", "PermissionRule", "Verdict"]

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


@record(frozen=True, slots=True)
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
