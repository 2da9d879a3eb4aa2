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

This module is pure: it describes hooks, ``membrane.agents.hook_reading`` reads them from a
``hooks`` value (only a parse needs it) and ``membrane.loop.command_hooks`` runs them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "COMMAND_HOOK_EVENTS",
    "DEFAULT_HOOK_TIMEOUT",
    "HOOK_POINTS",
    "MAX_HOOK_TIMEOUT",
    "CommandHook",
]

#: Claude Code's events that Membrane runs, and the hook point each one is.
COMMAND_HOOK_EVENTS: Mapping[str, str] = {
    "PreToolUse": "before_tool_call",
    "PostToolUse": "after_tool_call",
    "UserPromptSubmit": "before_agent_start",
    "SubagentStop": "agent_stop",
}
#: Every event a hook may run at: a definition's, and the settings' hooks' ``SubagentStart``
#: (run as a subagent starts) and ``Stop`` (a top-level run's own stop;
#: ``membrane.agents.settings_hooks``).
HOOK_POINTS: Mapping[str, str] = {
    **COMMAND_HOOK_EVENTS,
    "SubagentStart": "before_agent_start",
    "Stop": "agent_stop",
}
_TOOL_EVENTS: Final = frozenset({"PreToolUse", "PostToolUse"})
DEFAULT_HOOK_TIMEOUT: Final = 60.0
MAX_HOOK_TIMEOUT: Final = 600.0


@dataclass(frozen=True, slots=True)
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
        return HOOK_POINTS[self.event]

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
