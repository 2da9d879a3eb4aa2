"""``PermissionGate``: a child's permission rules, enforced on every call through its view.

The gate answers each call with the verdict of the tool's rules (``membrane.tools.permissions``:
the last matching rule wins, and a call no rule matches gets the tool's default), taken over
every subject the call has: each simple command of a ``Bash`` line must pass, so ``git log &&
rm x`` is refused by ``Bash(rm:*)`` in ``disallowed_tools`` and not allowed by ``Bash(git
log:*)`` alone; a command the text does not determine asks. Then:

* ``allow``: the call runs;
* ``deny``: ``tool-call-denied`` with a reason naming the rule and what matched, so the model
  can try something the rules allow;
* ``ask``: an ``allow`` rule of the settings (``approvals``, Claude Code's
  ``permissions.allow``) approves a call that asks only because no rule allows it; then the
  permission mode decides (``acceptEdits`` approves ``Edit``/``Write``,
  ``bypassPermissions`` approves, ``dontAsk`` refuses); otherwise the host's approver is asked,
  and without one the call fails with ``approval-unavailable``: a call no one can approve never
  runs.

A child that inherits its parent's tools is also held to the parent's gate, so inheriting never
lifts a rule the parent was under.
"""

from __future__ import annotations

import fnmatch
import inspect
import json
import os
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from membrane.errors import ApprovalUnavailable, ToolCallDenied
from membrane.json_types import JSONObject
from membrane.resolve.tools import builtin_of
from membrane.sandbox.shell_commands import SimpleCommand, simple_commands
from membrane.sandbox.shell_programs import BUILTINS, DELETERS
from membrane.tools.permissions import (
    NAME_RULE_TOOLS,
    PATH_RULE_TOOLS,
    ApprovalRequest,
    Approver,
    PermissionRule,
    ToolGate,
    Verdict,
    command_matches,
    conditions_hold,
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

    __slots__ = ("_approvals", "_by_rules", "_home", "_rules", "approver", "mode", "parent")

    def __init__(
        self,
        rules: Sequence[PermissionRule],
        *,
        by_rules: Collection[str] = (),
        mode: str = "default",
        approver: Approver | None = None,
        parent: ToolGate | None = None,
        home: str | None = None,
        approvals: Sequence[PermissionRule] = (),
    ) -> None:
        self._rules = tuple(rules)
        self._approvals = tuple(approvals)
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
        by_arguments = _by_arguments([r for r in rules if r.conditions], arguments)
        rules = [r for r in rules if not r.conditions]
        decision = by_arguments
        if rules or name in self._by_rules:
            decision = self._decide(name, rules, default, arguments, context)
            if by_arguments.verdict != "allow" and decision.verdict != "deny":
                decision = by_arguments
        if decision.verdict == "allow":
            return
        if decision.verdict == "ask" and self._approved(decision, name, tool, arguments, context):
            return
        subject = decision.subject
        shown = None if subject is None else _clip(subject)
        written = None if decision.rule is None else _text(decision.rule)
        if decision.verdict == "deny":
            reason = _deny_reason(tool.name, written, shown)
            if decision.why:
                reason = f"{reason} ({decision.why})"
            raise _denied(tool.name, written, shown, reason)
        await self.approve(tool, arguments, context, rule=written, subject=shown, why=decision.why)

    def _approved(
        self,
        decision: _Decision,
        name: str,
        tool: Tool,
        arguments: JSONObject,
        context: ToolContext,
    ) -> bool:
        """Whether an ``allow`` rule of the settings (Claude Code's ``permissions.allow``)
        approves a call that asks only because no rule allows it, or because its dialect asks
        before every such call (``dialect:claude-code``: Claude Code asks before each ``Bash``
        call no allow rule covers). A call an ``ask`` rule of a file matched, or one that asks
        for a reason of its own (a wrapper, an unknown program), still asks: in Claude Code an
        ask rule wins over an allow rule."""
        rule = decision.rule
        if decision.why is not None or (
            rule is not None and not rule.source.startswith("dialect:")
        ):
            return False
        approvals = [r for r in self._approvals if self._applies(r, tool)]
        if not approvals:
            return False
        return self._decide(name, approvals, "ask", arguments, context).verdict == "allow"

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
    ) -> _Decision:
        """The call's verdict, the rule that gave it and the subject it matched."""
        if name == "Bash":
            command = arguments.get("command")
            text = command if isinstance(command, str) else ""
            return self._commands(rules, default, text, context)
        if name in PATH_RULE_TOOLS:
            return _Decision(*self._path(name, rules, default, arguments, context))
        if name in NAME_RULE_TOOLS:
            subject = str(arguments.get(NAME_RULE_TOOLS[name], "")).lower()

            def named(rule: PermissionRule) -> bool:
                pattern = rule.pattern
                return pattern is None or fnmatch.fnmatchcase(subject, pattern.lower())

            return _Decision(*_last(rules, default, named), subject)
        return _Decision(*_last(rules, default, lambda rule: rule.pattern is None), None)

    def _commands(
        self,
        rules: Sequence[PermissionRule],
        default: Verdict,
        command: str,
        context: ToolContext,
    ) -> _Decision:
        parts = simple_commands(command)
        if not parts:
            verdict, rule = _last(rules, default, lambda r: r.pattern is None)
            return _Decision(verdict, rule, command)
        # Rules that refuse or ask about a command: they see through wrappers, and while one
        # is in force a command that may run something they cannot see asks.
        guards = [r for r in rules if r.pattern is not None and r.verdict != "allow"]
        result = _Decision("allow", None, None)
        for part in parts:
            found = self._command(part, rules, default, guards, context)
            if worst(result.verdict, found.verdict) != result.verdict or result.subject is None:
                result = found
        return result

    def _command(
        self,
        part: SimpleCommand,
        rules: Sequence[PermissionRule],
        default: Verdict,
        guards: Sequence[PermissionRule],
        context: ToolContext,
    ) -> _Decision:
        if part.unreadable is not None:
            base, rule = _last(rules, default, lambda r: r.pattern is None)
            verdict = worst(base, "ask")
            if verdict == base:
                return _Decision(verdict, rule, part.written)
            return _Decision(verdict, None, part.written, f"{part.written}: {part.unreadable}")
        verdict, rule = _last(rules, default, partial(_command_rule, part))
        if verdict != "allow" or not guards:
            return _Decision(verdict, rule, part.written, _concern(part, rule, rules))
        shown = part.written
        for guard in guards:
            assert guard.pattern is not None
            if any(command_matches(guard.pattern, text) for text in part.maybe):
                why = f"it may run, through a wrapper, a command that {_text(guard)} covers"
                return _Decision("ask", None, shown, f"{shown}: {why}")
        real = _real_programs(part, context)
        for guard in guards:
            assert guard.pattern is not None
            if any(command_matches(guard.pattern, text) for text in real):
                return _Decision(guard.verdict, guard, shown)
        unseen = part.hidden or _unseen_program(part, context)
        if unseen is not None:
            return _Decision("ask", None, shown, f"{shown}: {unseen}, and a rule is in force")
        if part.deletes:
            deny = next((g for g in guards if g.verdict == "deny" and _deleter(g)), None)
            if deny is not None:
                why = f"it deletes files, which {_text(deny)} refuses for rm"
                return _Decision("ask", None, shown, f"{shown}: {why}")
        return _Decision(verdict, rule, shown)

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
        why: str | None = None,
    ) -> None:
        """The ``ask`` path: the permission mode, then the host's approver; raises
        ``tool-call-denied`` or ``approval-unavailable`` unless the call is approved. A child's
        ``PreToolUse`` hook that answers ``ask`` comes here too."""
        await self.approve_call(
            builtin_of(tool) or tool.name,
            tool.name,
            arguments,
            context,
            rule=rule,
            subject=subject,
            why=why,
        )

    async def approve_call(
        self,
        name: str,
        shown: str,
        arguments: JSONObject,
        context: ToolContext,
        *,
        rule: str | None,
        subject: str | None,
        why: str | None = None,
    ) -> None:
        """:meth:`approve` for a call of the tool ``shown`` (``name``: its built-in name, or
        the same), for a caller that holds no ``Tool`` (a built-in read outside the roots)."""
        mode = self.mode
        if mode == "bypassPermissions" or (mode == "acceptEdits" and name in _EDIT_TOOLS):
            return
        why = (
            " - ".join(part for part in (rule, None if why is None else _clip(why, 400)) if part)
            or f"{shown} is granted only through rules, and none allows this call"
        )
        if mode == "dontAsk":
            raise _denied(
                shown,
                rule,
                subject,
                f"the call to {shown} needs approval ({why}) and the permission mode "
                "dontAsk refuses every such call; use a command or path the rules allow",
            )
        approver = self.approver
        if approver is None:
            raise ApprovalUnavailable(
                f"the call to {shown}{_on(subject)} needs approval ({why}), and no one can "
                "approve it in this run; use a command or path the rules allow",
                tool=shown,
                rule=rule,
                subject=subject,
            )
        request = ApprovalRequest(
            tool=shown,
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
                shown,
                rule,
                subject,
                f"the host refused the call to {shown}{_on(subject)} ({why}); "
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


def _by_arguments(rules: Sequence[PermissionRule], arguments: JSONObject) -> _Decision:
    """The verdict of a tool's argument rules: a ``deny`` rule that matches refuses, else an
    ``ask`` rule that matches asks, else a call no ``allow`` rule admits asks (when there are
    ``allow`` rules); ``deny`` wins whatever the order."""
    if not rules:
        return _Decision("allow", None, None)
    subject = json.dumps(arguments, sort_keys=True, default=str)
    for verdict in ("deny", "ask"):
        for rule in rules:
            if rule.verdict == verdict and conditions_hold(rule, arguments):
                return _Decision(verdict, rule, subject, rule.reason or None)
    allows = [rule for rule in rules if rule.verdict == "allow"]
    if allows and not any(conditions_hold(rule, arguments) for rule in allows):
        reasons = "; ".join(
            _text(rule) + (f": {rule.reason}" if rule.reason else "") for rule in allows
        )
        return _Decision("ask", None, subject, f"no argument rule admits this call ({reasons})")
    return _Decision("allow", None, subject)


@dataclass(frozen=True, slots=True)
class _Decision:
    """A call's verdict, the rule that gave it, the subject it matched, and why it asks when
    no rule says so."""

    verdict: Verdict
    rule: PermissionRule | None
    subject: str | None
    why: str | None = None


def _command_rule(part: SimpleCommand, rule: PermissionRule) -> bool:
    """An ``allow`` rule matches the command as written, and only when the rule writes out
    every part of it that is a concern (an assignment, a wrapper, a risky option); ``ask`` and
    ``deny`` rules match what the command runs behind its wrappers, with or without the
    program's folder (``/bin/rm x`` is ``rm x``)."""
    pattern = rule.pattern
    if pattern is None:
        return True
    if rule.verdict != "allow":
        return any(command_matches(pattern, text) for text in part.runs)
    if not command_matches(pattern, part.written):
        return False
    literal = _literal_words(pattern, part.words)
    return all(index < literal for index, _ in part.concerns)


def _literal_words(pattern: str, words: Sequence[str]) -> int:
    """How many of ``words`` the pattern writes out in full before any wildcard."""
    literal = pattern[:-2].rstrip() if pattern.endswith(":*") else pattern
    cut = min((i for i in (literal.find("*"), literal.find("?")) if i != -1), default=None)
    if cut is not None:
        literal = literal[:cut]
    length, count = -1, 0
    for word in words:
        length += len(word) + 1
        if length > len(literal):
            break
        count += 1
    return count


def _concern(
    part: SimpleCommand, rule: PermissionRule | None, rules: Sequence[PermissionRule]
) -> str | None:
    """Why a command that an ``allow`` rule's pattern matches still asks: the first concern
    the rule does not write out."""
    if rule is not None or not part.concerns:
        return None
    for allow in rules:
        pattern = allow.pattern
        if allow.verdict != "allow" or pattern is None:
            continue
        literal = 0
        if command_matches(pattern, part.written):
            literal = _literal_words(pattern, part.words)
        elif not any(command_matches(pattern, text) for text in part.runs):
            continue
        reason = next(r for i, r in part.concerns if i >= literal)
        return f"{part.written}: {reason}, which {_text(allow)} does not write out"
    return None


def _text(rule: PermissionRule) -> str:
    return rule.text or rule.tool


def _deleter(rule: PermissionRule) -> bool:
    """A rule about a program whose business is deleting files (``Bash(rm:*)``)."""
    pattern = rule.pattern or ""
    first = re.split(r"[\s:*?]", pattern, maxsplit=1)[0]
    return os.path.basename(first) in DELETERS


_TEMPORARY = ("/tmp", "/var/tmp", "/dev/shm")


def _lookup(program: str, context: ToolContext) -> str | None:
    """Where ``program`` is, as the child's shell would find it."""
    root = str(context.cwd or os.getcwd())
    if "/" in program:
        path = os.path.join(root, program)
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    search = context.env.get("PATH") or os.environ.get("PATH") or os.defpath
    for folder in search.split(os.pathsep):
        path = os.path.join(folder or ".", program)
        if not os.path.isabs(path):
            path = os.path.join(root, path)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _unseen_program(part: SimpleCommand, context: ToolContext) -> str | None:
    """Why a program of ``part`` may be something other than its name says: not found (made
    earlier in the line, or a function), or a file inside the checkout or a temporary folder
    (a copied binary, a script)."""
    root = os.path.realpath(context.cwd or os.getcwd())
    places = (root, *_TEMPORARY, os.environ.get("TMPDIR") or "/tmp")
    for program in part.programs:
        if "/" not in program and program in BUILTINS:
            continue
        found = _lookup(program, context)
        if found is None:
            return f"`{program}` is no program Membrane can find, so what it runs is unknown"
        real = os.path.realpath(found)
        if any(real == p or real.startswith(p.rstrip("/") + "/") for p in places):
            return f"`{program}` is a file in the checkout or a temporary folder"
    return None


def _real_programs(part: SimpleCommand, context: ToolContext) -> list[str]:
    """The commands of ``part`` named after what its programs really are (``./del`` linked to
    ``/bin/rm`` is ``rm``)."""
    out: list[str] = []
    for program in part.programs:
        found = _lookup(program, context)
        if found is None:
            continue
        real = os.path.basename(os.path.realpath(found))
        if real != os.path.basename(program):
            out += [real + text[len(program) :] for text in part.runs if text.startswith(program)]
    return out


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


def _clip(text: str, size: int = _SHOWN) -> str:
    return text if len(text) <= size else text[: size - 3] + "..."
