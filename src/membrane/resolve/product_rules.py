"""The permission rules of other products' settings files, as the ceiling every agent runs under.

``Settings.product_rules`` holds the rules of ``.claude/settings.json`` (and the user's and the
local one) and of ``opencode.json``'s ``permission``, in Claude Code's syntax
(``membrane.config.product_settings``). :func:`product_ceiling` reads them into one
:class:`~membrane.resolve.ceiling.Ceiling` that ``resolve()`` meets with the parent's, so they
hold for every agent of the tree, subagents included (DESIGN rule 13), with the file as each
one's source (``settings:.claude/settings.json``):

* ``deny`` of a whole tool (``Bash``, ``WebFetch``, ``mcp__github``): the tool is left out;
* ``deny``/``ask`` with a specifier (``Bash(rm:*)``, ``Read(./.env)``, ``Agent(explorer)``): a
  rule the ceiling's gate checks on every call, before the agent's own rules;
* ``allow``: a rule in the same list, matched last-wins with the others (``deny`` rules come
  after ``ask`` rules, which come after ``allow`` rules, so Claude Code's order holds: deny,
  then ask, then allow). An allow never grants a tool the agent's definition does not give.

Claude Code's names: ``Agent``/``Task`` are Membrane's ``Task`` (a specifier names the
subagent), ``MultiEdit``/``NotebookEdit`` are ``Edit``, ``LS`` is ``Glob``; path specifiers
follow Claude Code (``//abs``, ``~/home``, anything else under the project). A ``deny`` or
``ask`` whose specifier Membrane cannot match (``WebFetch(domain:x)``) refuses the whole tool,
with a warning: never less than the file asks for.

Pure: no I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Final

from membrane.config.values import ProductRule, Settings
from membrane.resolve.ceiling import Ceiling
from membrane.resolve.tools import Selector
from membrane.tools.permissions import NAME_RULE_TOOLS, RULE_TOOLS, PermissionRule, parse_rule
from membrane.vocabulary import canonical_builtin_name

__all__ = ["SETTINGS_SOURCE", "product_ceiling"]

#: The prefix of a product settings file's label as a ceiling source.
SETTINGS_SOURCE: Final = "settings:"
#: Claude Code tool names that are another Membrane name (the same authority).
_NAMES: Mapping[str, str] = {
    "agent": "Task",
    "task": "Task",
    "multiedit": "Edit",
    "notebookedit": "Edit",
    "ls": "Glob",
}


def product_ceiling(settings: Settings) -> tuple[Ceiling, tuple[str, ...]]:
    """The ceiling the products' rules make, and a warning for each rule Membrane reads more
    strictly than it is written (a rule that is not one among them)."""
    ceiling, warnings = _ceiling(settings.product_rules)
    if settings.no_bypass is not None:
        # Claude Code's disableBypassPermissionsMode: no agent's mode is above acceptEdits.
        source = SETTINGS_SOURCE + settings.no_bypass
        ceiling = ceiling.meet(Ceiling(mode="acceptEdits", mode_source=source))
    return ceiling, warnings


@functools.lru_cache(maxsize=32)
def _ceiling(rules: tuple[ProductRule, ...]) -> tuple[Ceiling, tuple[str, ...]]:
    if not rules:
        return Ceiling(), ()
    every = [_read(rule) for rule in rules]
    warnings = [w for _, w in every if w]
    read = [(rule, w) for rule, w in every if rule is not None]
    denied: list[tuple[str, str]] = []
    kept: list[tuple[PermissionRule, str]] = []
    for index, (rule, _) in enumerate(read):
        source = rule.source
        later = any(other.tool == rule.tool for other, _ in read[index + 1 :])
        if rule.pattern is None and rule.verdict == "deny" and not later:
            denied.append((_token(rule.tool), source))
        else:
            kept.append((rule, source))
    return Ceiling(denied=tuple(dict.fromkeys(denied)), rules=tuple(kept)), tuple(warnings)


def _token(tool: str) -> str:
    """A denied tool's token: ``mcp__SERVER`` (a whole server, in Claude Code) is
    ``mcp__SERVER__*``."""
    if tool.startswith("mcp__") and Selector.parse(tool) is None:
        return tool.rstrip("_") + "__*"
    return tool


def _read(product: ProductRule) -> tuple[PermissionRule | None, str | None]:
    parsed = parse_rule(product.rule)
    if parsed is None:
        # Never less than the file asks for: a deny or ask that cannot be read refuses the
        # whole tool it names.
        head = product.rule.partition("(")[0].strip()
        problem = f"{product.source}: {product.verdict} `{product.rule}` is not a rule"
        if product.verdict == "allow" or not head:
            return None, f"{problem}; it is ignored"
        return _read(ProductRule("deny", head, product.source))[0], (
            f"{problem}; every {head} call is refused"
        )
    head, pattern = parsed
    tool = _NAMES.get(head.lower()) or canonical_builtin_name(head) or head
    whole_server = tool.startswith("mcp__") and Selector.parse(tool) is None
    warning = None
    if pattern is not None and tool not in RULE_TOOLS and tool not in NAME_RULE_TOOLS:
        if product.verdict == "allow":
            warning = (
                f"{product.source}: allow `{product.rule}`: Membrane cannot match the "
                f"specifier of a {tool} call, so the rule approves nothing"
            )
        else:
            warning = (
                f"{product.source}: {product.verdict} `{product.rule}`: Membrane cannot match "
                f"the specifier of a {tool} call, so every {tool} call is refused"
            )
            pattern = None
            product = ProductRule("deny", product.rule, product.source)
    elif whole_server and product.verdict == "ask":
        warning = (
            f"{product.source}: ask `{product.rule}`: Membrane asks about each tool, not a "
            f"whole server, so the server's tools are refused (write {tool}__TOOL to ask)"
        )
        product = ProductRule("deny", product.rule, product.source)
    rule = PermissionRule(
        tool, pattern, product.verdict, text=product.rule, source=SETTINGS_SOURCE + product.source
    )
    return rule, warning
