"""The permission part of a child's authority: its mode and the rules of each callable tool.

``resolve_permissions`` is pure. It validates the permission mode, keeps the definition's rules
that govern a tool the child can call, and says which of those tools only rules grant (a call
no rule matches asks). ``explain`` prints the result, and the runtime builds the child's
``PermissionGate`` from the same value, so the rules explain lists are the rules enforced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from membrane.json_types import JSONDict
from membrane.resolve.tools import ToolPlan, builtin_of
from membrane.tools.rules import NAME_RULE_TOOLS, PERMISSION_MODES, PermissionRule
from membrane.tools.spec import Tool

__all__ = ["Permissions", "permission_mode", "resolve_permissions"]


@dataclass(frozen=True, slots=True)
class Permissions:
    """``mode``: the resolved permission mode; ``rules``: the definition's rules that govern a
    callable tool, in order; ``by_rules``: callable built-ins that only rules grant;
    ``tools``: each governed callable tool's rules; ``inherits_parent``: the child inherits
    its parent's tools and so is also held to the parent's rules."""

    mode: str = "default"
    rules: tuple[PermissionRule, ...] = ()
    by_rules: frozenset[str] = frozenset()
    tools: Mapping[str, tuple[PermissionRule, ...]] = field(default_factory=dict)
    inherits_parent: bool = False

    def default(self, name: str) -> str:
        """What a call of ``name`` that no rule matches gets: ``ask`` when only rules grant
        the tool or when it has argument rules that allow (a call none admits asks)."""
        if name in self.by_rules:
            return "ask"
        own = self.tools.get(name, ())
        return "ask" if any(r.conditions and r.verdict == "allow" for r in own) else "allow"

    def to_json(self) -> JSONDict:
        return {
            "mode": self.mode,
            "inherits_parent_rules": self.inherits_parent,
            "tools": {
                name: {
                    "default": self.default(name),
                    "rules": [rule.to_json() for rule in rules],
                }
                for name, rules in sorted(self.tools.items())
            },
        }


def permission_mode(value: object) -> tuple[str, list[str]]:
    """A resolved ``permission`` value as a mode, and a warning when it is not one."""
    text = value if isinstance(value, str) else "default"
    for mode in PERMISSION_MODES:
        if text.lower() == mode.lower():
            return mode, []
    return "default", [
        f"permission: {text!r} is not a permission mode ({', '.join(PERMISSION_MODES)}); "
        "the default mode applies (each ask goes to the host)"
    ]


def resolve_permissions(
    plan: ToolPlan,
    rules: tuple[PermissionRule, ...],
    callable_tools: Mapping[str, Tool],
    *,
    mode: str,
) -> Permissions:
    """The rules of ``rules`` that govern a tool in ``callable_tools``."""
    kept: list[PermissionRule] = []
    per_tool: dict[str, tuple[PermissionRule, ...]] = {}
    for name, tool in callable_tools.items():
        builtin = builtin_of(tool)
        own = tuple(
            rule
            for rule in rules
            if (rule.governs(builtin) if builtin is not None else rule.tool == name)
            and (builtin is not None or rule.pattern is None or name in NAME_RULE_TOOLS)
        )
        if own or (builtin is not None and builtin in plan.by_rules):
            per_tool[name] = own
            kept += [rule for rule in own if rule not in kept]
    return Permissions(
        mode=mode,
        rules=tuple(rule for rule in rules if rule in kept),
        by_rules=frozenset(name for name in plan.by_rules if name in callable_tools),
        tools=per_tool,
        inherits_parent=plan.inherit,
    )
