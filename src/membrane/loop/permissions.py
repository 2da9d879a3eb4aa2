"""``PermissionGate``: a child's permission rules, enforced on every call through its view.

The gate answers each call with the verdict of the tool's rules (``membrane.tools.permissions``:
the last matching rule wins, and a call no rule matches gets the tool's default), taken over
every subject the call has: each simple command of a ``Bash`` line must pass, so ``git log &&
rm x`` is refused by ``Bash(rm:*)`` in ``disallowed_tools`` and not allowed by ``Bash(git
log:*)`` alone; a command the text does not determine asks. Then:

* ``allow``: the call runs;
* ``deny``: ``tool-call-denied`` with a reason naming the rule and what matched, so the model
  can try something the rules allow;
* ``ask``: the permission mode decides first (``acceptEdits`` approves ``Edit``/``Write``,
  ``bypassPermissions`` approves, ``dontAsk`` refuses); otherwise the host's approver is asked,
  and without one the call fails with ``approval-unavailable``: a call no one can approve never
  runs.

A child that inherits its parent's tools is also held to the parent's gate, so inheriting never
lifts a rule the parent was under.
"""

from __future__ import annotations

import fnmatch
import inspect
import os
from collections.abc import Callable, Collection, Sequence
from functools import partial
from pathlib import Path

from membrane.errors import ApprovalUnavailable, ToolCallDenied
from membrane.json_types import JSONObject
from membrane.resolve.tools import builtin_of
from membrane.sandbox.shell_commands import SimpleCommand, simple_commands
from membrane.tools.permissions import (
    NAME_RULE_TOOLS,
    PATH_RULE_TOOLS,
    ApprovalRequest,
    Approver,
    PermissionRule,
    ToolGate,
    Verdict,
    command_matches,
    path_matches,
    worst,
)
from membrane.tools.spec import Tool, ToolContext

__all__ = ["PermissionGate"]

_EDIT_TOOLS = frozenset({"Edit", "Write"})
_SHOWN = 120


class PermissionGate:
    """The rules of one scope. ``by_rules`` are the tools only rules grant (their default is
    ``ask``); ``mode`` is the resolved permission mode; ``approver`` answers ``ask`` calls;
    ``parent`` is the parent's gate, checked first (an inheriting child)."""

    __slots__ = ("_by_rules", "_home", "_rules", "approver", "mode", "parent")

    def __init__(
        self,
        rules: Sequence[PermissionRule],
        *,
        by_rules: Collection[str] = (),
        mode: str = "default",
        approver: Approver | None = None,
        parent: ToolGate | None = None,
        home: str | None = None,
    ) -> None:
        self._rules = tuple(rules)
        self._by_rules = frozenset(by_rules)
        self.mode = mode
        self.approver = approver
        self.parent = parent
        self._home = home if home is not None else os.path.expanduser("~")

    @property
    def rules(self) -> tuple[PermissionRule, ...]:
        return self._rules

    def governs(self, tool: Tool) -> bool:
        """Whether any rule (or a rules-only grant) applies to ``tool``."""
        name = builtin_of(tool) or tool.name
        return name in self._by_rules or any(self._applies(r, tool) for r in self._rules)

    async def check(self, tool: Tool, arguments: JSONObject, context: ToolContext) -> None:
        if self.parent is not None:
            await self.parent.check(tool, arguments, context)
        name = builtin_of(tool) or tool.name
        rules = [r for r in self._rules if self._applies(r, tool)]
        if not rules and name not in self._by_rules:
            return
        default: Verdict = "ask" if name in self._by_rules else "allow"
        verdict, rule, subject = self._decide(name, rules, default, arguments, context)
        if verdict == "allow":
            return
        shown = None if subject is None else _clip(subject)
        written = None if rule is None else (rule.text or rule.tool)
        if verdict == "deny":
            raise _denied(tool.name, written, shown, _deny_reason(tool.name, written, shown))
        await self.approve(tool, arguments, context, rule=written, subject=shown)

    def _applies(self, rule: PermissionRule, tool: Tool) -> bool:
        builtin = builtin_of(tool)
        if builtin is not None:
            return rule.governs(builtin)
        if rule.tool != tool.name:
            return False
        return rule.pattern is None or tool.name in NAME_RULE_TOOLS

    def _decide(
        self,
        name: str,
        rules: Sequence[PermissionRule],
        default: Verdict,
        arguments: JSONObject,
        context: ToolContext,
    ) -> tuple[Verdict, PermissionRule | None, str | None]:
        """The call's verdict, the rule that gave it and the subject it matched."""
        if name == "Bash":
            command = arguments.get("command")
            return self._commands(rules, default, command if isinstance(command, str) else "")
        if name in PATH_RULE_TOOLS:
            return self._path(name, rules, default, arguments, context)
        if name in NAME_RULE_TOOLS:
            subject = str(arguments.get(NAME_RULE_TOOLS[name], "")).lower()

            def named(rule: PermissionRule) -> bool:
                pattern = rule.pattern
                return pattern is None or fnmatch.fnmatchcase(subject, pattern.lower())

            return (*_last(rules, default, named), subject)
        return (*_last(rules, default, lambda rule: rule.pattern is None), None)

    def _commands(
        self, rules: Sequence[PermissionRule], default: Verdict, command: str
    ) -> tuple[Verdict, PermissionRule | None, str | None]:
        result: tuple[Verdict, PermissionRule | None, str | None] = ("allow", None, None)
        parts = simple_commands(command)
        if not parts:
            verdict, rule = _last(rules, default, lambda r: r.pattern is None)
            return verdict, rule, command
        for part in parts:
            if part is None:
                base, rule = _last(rules, default, lambda r: r.pattern is None)
                verdict = worst(base, "ask")
                found: tuple[Verdict, PermissionRule | None, str | None] = (
                    verdict,
                    rule if verdict == base else None,
                    command,
                )
            else:
                verdict, rule = _last(rules, default, partial(_command_rule, part))
                found = (verdict, rule, part.written)
            if worst(result[0], found[0]) != result[0] or result[2] is None:
                result = found
        return result

    def _path(
        self,
        name: str,
        rules: Sequence[PermissionRule],
        default: Verdict,
        arguments: JSONObject,
        context: ToolContext,
    ) -> tuple[Verdict, PermissionRule | None, str | None]:
        key, fallback = PATH_RULE_TOOLS[name]
        raw = arguments.get(key, fallback)
        root = Path(context.cwd or os.getcwd()).resolve()
        target = (root / str(raw if raw is not None else ".")).resolve()
        try:
            relative: str | None = target.relative_to(root).as_posix()
        except ValueError:
            relative = None
        if relative == ".":
            relative = ""
        absolute = target.as_posix()

        def matches(rule: PermissionRule) -> bool:
            pattern = rule.pattern
            if pattern is None:
                return True
            return path_matches(pattern, relative, absolute, home=self._home)

        verdict, rule = _last(rules, default, matches)
        return verdict, rule, relative if relative else absolute

    async def approve(
        self,
        tool: Tool,
        arguments: JSONObject,
        context: ToolContext,
        *,
        rule: str | None,
        subject: str | None,
    ) -> None:
        """The ``ask`` path: the permission mode, then the host's approver; raises
        ``tool-call-denied`` or ``approval-unavailable`` unless the call is approved. A child's
        ``PreToolUse`` hook that answers ``ask`` comes here too."""
        name = builtin_of(tool) or tool.name
        mode = self.mode
        if mode == "bypassPermissions" or (mode == "acceptEdits" and name in _EDIT_TOOLS):
            return
        why = rule or f"{tool.name} is granted only through rules, and none allows this call"
        if mode == "dontAsk":
            raise _denied(
                tool.name,
                rule,
                subject,
                f"the call to {tool.name} needs approval ({why}) and the permission mode "
                "dontAsk refuses every such call; use a command or path the rules allow",
            )
        approver = self.approver
        if approver is None:
            raise ApprovalUnavailable(
                f"the call to {tool.name}{_on(subject)} needs approval ({why}), and no one can "
                "approve it in this run; use a command or path the rules allow",
                tool=tool.name,
                rule=rule,
                subject=subject,
            )
        request = ApprovalRequest(
            tool=tool.name,
            arguments=arguments,
            subject=subject,
            reason=why,
            agent=context.agent,
            run_id=context.run_id,
        )
        answer = approver(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is not True:
            raise _denied(
                tool.name,
                rule,
                subject,
                f"the host refused the call to {tool.name}{_on(subject)} ({why}); "
                "do not retry it as is",
            )

    def __repr__(self) -> str:
        return f"PermissionGate({len(self._rules)} rules, mode={self.mode!r})"


def _last(
    rules: Sequence[PermissionRule], default: Verdict, matches: Callable[[PermissionRule], bool]
) -> tuple[Verdict, PermissionRule | None]:
    """The last rule that ``matches``, and its verdict; the default when none does."""
    found: PermissionRule | None = None
    for rule in rules:
        if matches(rule):
            found = rule
    return (default, None) if found is None else (found.verdict, found)


def _command_rule(part: SimpleCommand, rule: PermissionRule) -> bool:
    """An ``allow`` rule matches the command as written; ``ask``/``deny`` also match it with
    the program's folder dropped (``/bin/rm x`` is ``rm x``)."""
    if rule.pattern is None:
        return True
    if command_matches(rule.pattern, part.written):
        return True
    return rule.verdict != "allow" and command_matches(rule.pattern, part.program_name)


def _denied(tool: str, rule: str | None, subject: str | None, reason: str) -> ToolCallDenied:
    return ToolCallDenied(reason, tool=tool, rule=rule, subject=subject, reason=reason)


def _deny_reason(tool: str, rule: str | None, subject: str | None) -> str:
    if rule is None:
        return f"the call to {tool}{_on(subject)} is not allowed by this agent's rules"
    return (
        f"the call to {tool}{_on(subject)} is denied by the rule {rule}; "
        "use a command or path the rules allow"
    )


def _on(subject: str | None) -> str:
    return "" if not subject else f" (`{subject}`)"


def _clip(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
