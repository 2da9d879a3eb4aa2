"""One argument-level permission rule as a definition or the settings hold it: the tool, the
pattern, the verdict (``membrane.tools.permissions`` explains and enforces them); and the
permission modes.

A module of its own, so that reading definitions (``membrane agents list``) and resolving a
child's permissions (``membrane explain``) need neither the tool model nor the matchers and
gates that enforce the rules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from membrane.config.values import Verdict
from membrane.json_types import JSONDict

__all__ = [
    "CONDITION_TESTS",
    "NAME_RULE_TOOLS",
    "PERMISSION_MODES",
    "RULE_TOOLS",
    "VERDICTS",
    "WHEN_PRESENT",
    "Condition",
    "PermissionRule",
    "Verdict",
]

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


#: The tests a condition applies to one argument: ``equals`` (JSON equality), ``glob`` (a
#: shell glob over the whole text), ``regex`` (an RE2 pattern over the whole text), ``min`` and
#: ``max`` (inclusive numeric bounds), ``one_of`` (JSON equality with any value listed).
CONDITION_TESTS: Final = ("equals", "glob", "regex", "min", "max", "one_of")
#: The key that makes an argument's tests apply only when the call supplies the argument.
WHEN_PRESENT: Final = "when_present"
_SYMBOLS: Mapping[str, str] = {"equals": "==", "min": ">=", "max": "<=", "one_of": "one of"}


@dataclass(frozen=True, slots=True)
class Condition:
    """One test on one argument of a call (``amount`` ``max`` ``100``). ``argument`` may be a
    dotted path into an object (``payee.iban``). ``when_present``: the test applies only when
    the call supplies the argument; a call that leaves it out passes it (otherwise a missing
    argument passes no test)."""

    argument: str
    test: str
    value: str | int | float | bool | tuple[str | int | float | bool | None, ...] | None
    when_present: bool = False

    def describe(self) -> str:
        value = self.value
        shown = (
            "[" + ", ".join(json.dumps(v) for v in value) + "]"
            if isinstance(value, tuple)
            else json.dumps(value)
        )
        text = f"{self.argument} {_SYMBOLS.get(self.test, self.test)} {shown}"
        return f"{text} when present" if self.when_present else text

    def to_json(self) -> JSONDict:
        value = self.value
        out: JSONDict = {
            "argument": self.argument,
            "test": self.test,
            "value": list(value) if isinstance(value, tuple) else value,
        }
        if self.when_present:
            out[WHEN_PRESENT] = True
        return out


@dataclass(frozen=True, slots=True)
class PermissionRule:
    """One rule. ``tool`` is a built-in's canonical name or another tool's exact name; ``text``
    is the rule as written (``Bash(git log:*)``) and ``source`` where (``tools``,
    ``disallowed_tools``, ``ask_tools``, ``permission.bash``). ``grants``: the rule also
    grants its tool (a rule in ``tools``, OpenCode's ``allow``/``ask``), whose calls no rule
    matches then ask.

    ``conditions``: an argument rule (a ``rules:`` entry, the settings' ``[[rules]]``), on any
    tool: it matches a call whose arguments pass every condition; ``reason`` is what the model
    is told when it refuses or asks. Argument rules never grant a tool."""

    tool: str
    pattern: str | None
    verdict: Verdict
    text: str = ""
    source: str = ""
    grants: bool = False
    conditions: tuple[Condition, ...] = ()
    reason: str = ""

    def governs(self, builtin: str) -> bool:
        """Whether this rule applies to calls of the built-in ``builtin``."""
        if self.conditions:
            return builtin == self.tool
        return builtin in RULE_TOOLS.get(self.tool, (self.tool,))

    def to_json(self) -> JSONDict:
        out: JSONDict = {
            "tool": self.tool,
            "pattern": self.pattern,
            "verdict": self.verdict,
            "rule": self.text or self.tool,
            "source": self.source,
        }
        if self.conditions:
            out["conditions"] = [condition.to_json() for condition in self.conditions]
            out["reason"] = self.reason
        return out
