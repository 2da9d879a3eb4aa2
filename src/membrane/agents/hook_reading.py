"""Reading a definition's ``hooks`` value into ``CommandHook`` values (the format is
described in ``membrane.agents.command_hooks``); only a parse imports this."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import Any, NoReturn

from membrane.agents.command_hooks import (
    COMMAND_HOOK_EVENTS,
    DEFAULT_HOOK_TIMEOUT,
    MAX_HOOK_TIMEOUT,
    CommandHook,
)

__all__ = ["read_hooks"]

#: Read as another event: in a subagent's file ``Stop`` is its own stop.
_SAME_AS: Mapping[str, str] = {"Stop": "SubagentStop"}
_ANY = frozenset({"", "*"})
_HINT = (
    "write `hooks: {PreToolUse: [{matcher: Bash, hooks: [{type: command, command: ./check.sh}]}]}`"
)


Fail = Callable[[str, str], NoReturn]
Warn = Callable[[str, str], None]


def read_hooks(
    value: Any,
    *,
    fail: Fail,
    warn: Warn,
    events: Collection[str] = COMMAND_HOOK_EVENTS,
    same_as: Mapping[str, str] = _SAME_AS,
) -> tuple[CommandHook, ...]:
    """The command hooks of a ``hooks`` value, in file order.

    ``fail(problem, hint)`` refuses the file; ``warn(code, message)`` reports what is left out.
    ``events``: the events read (a definition's by default); ``same_as``: events read as
    another (in a subagent's file ``Stop`` is its own stop, ``SubagentStop``).
    """
    if not isinstance(value, Mapping):
        fail(f"must map hook events to matcher groups, got {type(value).__name__}", _HINT)
    hooks: list[CommandHook] = []
    for raw_event, groups in value.items():
        event = same_as.get(str(raw_event), str(raw_event))
        if event not in events:
            known = list(dict.fromkeys([*same_as, *events]))
            warn(
                "dialect-unsupported",
                f"`hooks.{raw_event}`: Membrane runs the hook events "
                f"{', '.join(known)}; these hooks are left out",
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
            re.compile(matcher)
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
