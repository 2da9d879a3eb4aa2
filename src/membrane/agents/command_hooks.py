"""Command hooks in a definition's frontmatter: Claude Code's ``hooks``, read for that agent only.

A Claude Code subagent file may carry hooks that run shell commands at points of its session::

    hooks:
      PreToolUse:
        - matcher: "Bash"
          hooks:
            - type: command
              command: ./.claude/hooks/block-rm.sh
              timeout: 10
      PostToolUse:
        - matcher: "Edit|Write"
          hooks:
            - {type: command, command: ./.claude/hooks/lint.sh}

Each event maps onto one of Membrane's hook points of that child (and no other):

* ``PreToolUse``: ``before_tool_call``, before each call whose tool name the matcher matches;
* ``PostToolUse``: ``after_tool_call``, after such a call succeeded, with its result;
* ``UserPromptSubmit``: ``before_agent_start``, once, with the child's task as the prompt;
* ``Stop`` and ``SubagentStop``: ``agent_stop``, when the child gives its final answer (in a
  subagent's file ``Stop`` means its own stop, as Claude Code reads it: ``SubagentStop``).

``matcher`` is a case-sensitive regular expression that must match the whole tool name
(``Edit|Write``, ``mcp__docs__.*``); ``*``, an empty string or no matcher matches every tool. It
applies to the tool events only. ``timeout`` is in seconds (default 60). Only ``type: command``
hooks run; another type (``prompt``, ``agent``, ``http``) or another event is warned about
(``dialect-unsupported``) and left out. A malformed ``hooks`` value makes the file unusable: a
guard its author wrote is never silently dropped.

This module is pure: it reads and describes hooks. ``membrane.loop.command_hooks`` runs them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn

from membrane._record import record

__all__ = [
    "COMMAND_HOOK_EVENTS",
    "DEFAULT_HOOK_TIMEOUT",
    "MAX_HOOK_TIMEOUT",
    "CommandHook",
    "read_hooks",
]

#: Claude Code's events that Membrane runs, and the hook point each one is.
COMMAND_HOOK_EVENTS: Mapping[str, str] = {
    "PreToolUse": "before_tool_call",
    "PostToolUse": "after_tool_call",
    "UserPromptSubmit": "before_agent_start",
    "SubagentStop": "agent_stop",
}
#: Read as another event: in a subagent's file ``Stop`` is its own stop.
_SAME_AS: Mapping[str, str] = {"Stop": "SubagentStop"}
_TOOL_EVENTS: Final = frozenset({"PreToolUse", "PostToolUse"})
DEFAULT_HOOK_TIMEOUT: Final = 60.0
MAX_HOOK_TIMEOUT: Final = 600.0
_ANY = frozenset({"", "*"})
_HINT = (
    "write `hooks: {PreToolUse: [{matcher: Bash, hooks: [{type: command, command: ./check.sh}]}]}`"
)


@record(frozen=True, slots=True)
class CommandHook:
    """One command hook. ``event`` is Claude Code's name (``Stop`` is read as
    ``SubagentStop``); ``matcher`` ``None`` matches every tool; ``timeout`` is in seconds."""

    event: str
    command: str
    matcher: str | None = None
    timeout: float = DEFAULT_HOOK_TIMEOUT

    @property
    def point(self) -> str:
        """Membrane's hook point: ``before_tool_call``, ``after_tool_call``,
        ``before_agent_start`` or ``agent_stop``."""
        return COMMAND_HOOK_EVENTS[self.event]

    def matches(self, tool: str) -> bool:
        """Whether the hook runs for a call of ``tool`` (always, for a non-tool event)."""
        if self.matcher is None or self.event not in _TOOL_EVENTS:
            return True
        return _compiled(self.matcher).fullmatch(tool) is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "point": self.point,
            "matcher": self.matcher,
            "type": "command",
            "command": self.command,
            "timeout": self.timeout,
        }


def _compiled(matcher: str) -> re.Pattern[str]:
    return re.compile(matcher)


Fail = Callable[[str, str], NoReturn]
Warn = Callable[[str, str], None]


def read_hooks(value: Any, *, fail: Fail, warn: Warn) -> tuple[CommandHook, ...]:
    """The command hooks of a ``hooks`` value, in file order.

    ``fail(problem, hint)`` refuses the file; ``warn(code, message)`` reports what is left out.
    """
    if not isinstance(value, Mapping):
        fail(f"must map hook events to matcher groups, got {type(value).__name__}", _HINT)
    hooks: list[CommandHook] = []
    for raw_event, groups in value.items():
        event = _SAME_AS.get(str(raw_event), str(raw_event))
        if event not in COMMAND_HOOK_EVENTS:
            warn(
                "dialect-unsupported",
                f"`hooks.{raw_event}`: Membrane runs the hook events "
                f"{', '.join(['Stop', *COMMAND_HOOK_EVENTS])}; these hooks are left out",
            )
            continue
        if not isinstance(groups, list):
            fail(f"`{raw_event}` must be a list of matcher groups", _HINT)
        for group in groups:
            hooks += _group(str(raw_event), event, group, fail=fail, warn=warn)
    return tuple(hooks)


def _group(written: str, event: str, group: Any, *, fail: Fail, warn: Warn) -> list[CommandHook]:
    where = f"`hooks.{written}`"
    if not isinstance(group, Mapping):
        fail(f"{where} holds a {type(group).__name__}, not a matcher group", _HINT)
    unknown = sorted(set(map(str, group)) - {"matcher", "hooks"})
    if unknown:
        fail(f"{where}: a matcher group has only `matcher` and `hooks`, not {unknown}", _HINT)
    matcher = group.get("matcher")
    if matcher is not None and not isinstance(matcher, str):
        fail(f"{where}: `matcher` must be a tool-name pattern, got {matcher!r}", _HINT)
    if matcher is not None and matcher.strip() in _ANY:
        matcher = None
    if matcher is not None:
        try:
            _compiled(matcher)
        except re.error as exc:
            fail(f"{where}: `matcher` {matcher!r} is not a regular expression ({exc})", _HINT)
    entries = group.get("hooks")
    if not isinstance(entries, list) or not entries:
        fail(f"{where}: a matcher group needs a non-empty `hooks` list", _HINT)
    out: list[CommandHook] = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            fail(f"{where}: each hook is a mapping with `type` and `command`", _HINT)
        kind = entry.get("type", "command")
        if kind != "command":
            warn(
                "dialect-unsupported",
                f"{where}: a `type: {kind}` hook is not run (Membrane runs `type: command` "
                "hooks); it is left out",
            )
            continue
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            fail(f"{where}: a command hook needs a non-empty `command`", _HINT)
        timeout = entry.get("timeout", DEFAULT_HOOK_TIMEOUT)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not 0 < timeout <= MAX_HOOK_TIMEOUT
        ):
            fail(
                f"{where}: `timeout` must be a number of seconds above 0 and at most "
                f"{MAX_HOOK_TIMEOUT:g}, got {timeout!r}",
                _HINT,
            )
        out.append(CommandHook(event, command.strip(), matcher, float(timeout)))
    return out
