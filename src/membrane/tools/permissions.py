"""Argument-level permission rules: ``Bash(git log:*)``, ``Edit(src/**)``, allow/ask/deny.

A ``PermissionRule`` says what happens to a call of one tool whose *subject* matches its pattern
(``None``: every call): ``allow``, ``ask`` (a host approves or refuses it) or ``deny``. A tool's
rules are read in order and the **last matching rule wins**; a call no rule matches gets the
tool's default (``allow`` when the tool was granted plainly, ``ask`` when only rules grant it).

Subjects: ``Bash`` rules match each simple command of the ``command`` argument; ``Read``,
``Glob`` and ``Grep`` rules match the path read, ``Edit`` rules the path changed by ``Edit`` or
``Write`` (``Write`` rules only ``Write``'s). Any tool may carry a rule without a pattern.

Command patterns: ``git log:*`` is a prefix at a word boundary (``git log``, ``git log -1``,
never ``git logs``); otherwise ``*`` matches any text and ``?`` one character, a trailing
`` *`` also matches nothing (``git *`` matches ``git``), and a pattern without wildcards must
equal the command. Path patterns are gitignore-like: ``*`` and ``?`` stay inside one folder,
``**`` crosses folders, a pattern without a ``/`` matches a name at any depth; ``//x`` is the
absolute path ``/x``, ``~/x`` is under the home folder, anything else is relative to the
checkout.

The rules are enforced by a ``ToolGate`` on the scope's view (``ToolView.call``), so every path
that runs a tool (the agent loop, Code Mode, a mention clone) meets them.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from membrane.json_types import JSONDict, JSONObject
from membrane.tools.rules import (
    NAME_RULE_TOOLS,
    PERMISSION_MODES,
    RULE_TOOLS,
    VERDICTS,
    Condition,
    PermissionRule,
    Verdict,
)
from membrane.tools.spec import ToolGate, ToolObserver

__all__ = [
    "NAME_RULE_TOOLS",
    "PATH_RULE_TOOLS",
    "PERMISSION_MODES",
    "RULE_TOOLS",
    "VERDICTS",
    "ApprovalRequest",
    "Approver",
    "PermissionRule",
    "ToolGate",
    "ToolObserver",
    "Verdict",
    "command_matches",
    "conditions_hold",
    "parse_rule",
    "path_matches",
    "worst",
]

#: The argument holding the path each file tool reads or changes (and its default).
PATH_RULE_TOOLS: Mapping[str, tuple[str, str | None]] = {
    "Read": ("file_path", None),
    "Edit": ("file_path", None),
    "Write": ("file_path", None),
    "Glob": ("path", "."),
    "Grep": ("path", "."),
}
_RANK: Mapping[str, int] = {"allow": 0, "ask": 1, "deny": 2}


def worst(*verdicts: Verdict) -> Verdict:
    """The most restrictive of ``verdicts`` (``deny`` > ``ask`` > ``allow``)."""
    return max(verdicts, key=_RANK.__getitem__, default="allow")


def parse_rule(token: str) -> tuple[str, str | None] | None:
    """``Tool(pattern)`` as ``(Tool, pattern)``, ``Tool`` as ``(Tool, None)``; ``None`` when the
    parentheses are not balanced around a non-empty pattern."""
    text = token.strip()
    if "(" not in text and ")" not in text:
        return (text, None) if text else None
    head, _, rest = text.partition("(")
    if not head.strip() or not rest.endswith(")") or "(" in head:
        return None
    pattern = rest[:-1].strip()
    return (head.strip(), pattern) if pattern else None


def command_matches(pattern: str, command: str) -> bool:
    """Whether one simple command (its words joined by single spaces) matches ``pattern``."""
    if pattern.endswith(":*"):
        prefix = pattern[:-2].rstrip()
        return command == prefix or command.startswith(prefix + " ")
    if "*" not in pattern and "?" not in pattern:
        return command == pattern
    return _command_regex(pattern).fullmatch(command) is not None


@lru_cache(maxsize=512)
def _command_regex(pattern: str) -> re.Pattern[str]:
    optional_tail = pattern.endswith(" *")
    body = pattern[:-2] if optional_tail else pattern
    parts = [".*" if c == "*" else "." if c == "?" else re.escape(c) for c in body]
    return re.compile("".join(parts) + ("(?: .*)?" if optional_tail else ""), re.DOTALL)


def conditions_hold(rule: PermissionRule, arguments: Mapping[str, object]) -> bool:
    """Whether a call's ``arguments`` pass every condition of an argument rule. A missing
    argument passes none, unless its condition applies only ``when_present`` (then it passes:
    the condition does not constrain a call that leaves the argument out); a list passes an
    ``allow`` rule's test when every item does, a ``deny``/``ask`` rule's when any item does."""
    every = rule.verdict == "allow"
    for condition in rule.conditions:
        found, value = _argument(arguments, condition.argument)
        if not found:
            if condition.when_present:
                continue
            return False
        items = value if isinstance(value, list) else [value]
        results = [_passes(condition, item) for item in items]
        if not results or not (all(results) if every else any(results)):
            return False
    return True


def _argument(arguments: Mapping[str, object], path: str) -> tuple[bool, object]:
    value: object = arguments
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _passes(condition: Condition, value: object) -> bool:
    test, expected = condition.test, condition.value
    if test == "equals":
        return _same(value, expected)
    if test == "one_of":
        return isinstance(expected, tuple) and any(_same(value, e) for e in expected)
    if test in ("min", "max"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        bound = float(expected) if isinstance(expected, int | float) else 0.0
        return value >= bound if test == "min" else value <= bound
    if not isinstance(value, str) or not isinstance(expected, str):
        return False
    if test == "glob":
        return fnmatch.fnmatchcase(value, expected)
    return bool(_regex(expected).fullmatch(value) is not None)


def _same(value: object, expected: object) -> bool:
    """JSON equality: ``1 == 1.0``, but ``true`` is not ``1``."""
    if isinstance(value, bool) or isinstance(expected, bool):
        return value is expected
    return value == expected


@lru_cache(maxsize=256)
def _regex(pattern: str) -> Any:
    import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


def path_matches(pattern: str, relative: str | None, absolute: str, *, home: str | None) -> bool:
    """Whether a path matches ``pattern``. ``relative`` is the path inside the checkout (POSIX,
    no leading ``./``; ``None`` outside it), ``absolute`` the resolved absolute path."""
    if pattern.startswith("//"):
        return _path_regex(pattern[1:]).fullmatch(absolute) is not None
    if pattern.startswith("~/"):
        if home is None:
            return False
        base = home.rstrip("/") + "/"
        return absolute.startswith(base) and _fits(pattern[2:], absolute[len(base) :])
    if relative is None:
        return False
    return _fits(pattern.removeprefix("./").lstrip("/"), relative)


def _fits(pattern: str, relative: str) -> bool:
    anchored = "/" in pattern.rstrip("/")
    body = pattern.rstrip("/") if pattern.endswith("/") else pattern
    if pattern.endswith("/"):
        body += "/**"
    return _path_regex(body if anchored else "**/" + body).fullmatch(relative) is not None


@lru_cache(maxsize=512)
def _path_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    index = 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
        elif pattern.startswith("/**", index) and index + 3 == len(pattern):
            out.append("(?:/.*)?")
            index += 3
        elif pattern.startswith("**", index):
            out.append(".*")
            index += 2
        else:
            char = pattern[index]
            out.append("[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char))
            index += 1
    return re.compile("".join(out), re.DOTALL)


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A call that an ``ask`` rule holds for the host's answer."""

    tool: str
    arguments: JSONObject
    #: What the rule matched: the command, or the path; ``None`` for a rule without a pattern.
    subject: str | None
    #: The rule that asked, as written (``Bash(git push:*)``), or why the call asks.
    reason: str
    agent: str = "main"
    run_id: str | None = None
    extra: Mapping[str, object] = field(default_factory=dict)

    def to_json(self) -> JSONDict:
        return {
            "tool": self.tool,
            "arguments": dict(self.arguments),
            "subject": self.subject,
            "reason": self.reason,
            "agent": self.agent,
            "runId": self.run_id,
        }


#: The host's answer to an ``ask``: ``True`` runs the call, ``False`` refuses it.
Approver = Callable[[ApprovalRequest], Awaitable[bool] | bool]
