"""The ``hooks`` of Claude Code's settings files, as the hooks of every agent of the tree.

A hook in ``.claude/settings.json`` (or the user's, or the local one) is the deployment's: in
Claude Code it fires for the session and its subagents alike, and so it does here, with the
events meaning what they mean there:

* ``PreToolUse``, ``PostToolUse``: around each call of every agent, subagents included, whose
  tool name the matcher matches;
* ``UserPromptSubmit``: on the task of a top-level run (the prompt its host submitted);
* ``Stop``: when a top-level run gives its final answer (a block sends it back to work);
* ``SubagentStart``: as a subagent starts, for each subagent whose agent type the matcher
  matches; what it prints as ``hookSpecificOutput.additionalContext`` joins the subagent's
  context, and it cannot stop the start (as in Claude Code);
* ``SubagentStop``: when such a subagent gives its final answer (a block sends it back).

Each runs inside the boundary of the agent it fires for (its checkout, its sandbox), as a
definition's own hooks do (``membrane.loop.command_hooks``), after them. Other events
(``SessionStart``, ``Notification``, ...) and hook types other than ``command`` are warned about
when the file is read and left out.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import replace
from typing import Final, NoReturn

from membrane.agents.command_hooks import CommandHook
from membrane.agents.hook_reading import read_hooks
from membrane.config.values import Settings
from membrane.errors import SettingsError

__all__ = ["SETTINGS_HOOK_EVENTS", "settings_hook_warnings", "settings_hooks"]

#: The events of a settings file's hooks that Membrane runs.
SETTINGS_HOOK_EVENTS: Final = (
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "Stop",
    "SubagentStart",
    "SubagentStop",
)
_EVERY_AGENT: Final = frozenset({"PreToolUse", "PostToolUse"})


def settings_hooks(settings: Settings, *, agent: str, depth: int) -> tuple[CommandHook, ...]:
    """The settings' hooks that fire for ``agent`` running at ``depth`` (0: top level): its
    runner runs ``Stop`` (a top-level run) and ``SubagentStop`` (a subagent) at its own stop."""
    out: list[CommandHook] = []
    for hook in _read(settings.product_hooks)[0]:
        if hook.event in _EVERY_AGENT:
            out.append(hook)
            continue
        top_level = depth == 0 and hook.event in ("UserPromptSubmit", "Stop")
        subagent = depth > 0 and hook.event in ("SubagentStart", "SubagentStop")
        if top_level or (subagent and _names(hook, agent)):
            # The matcher named the subagent's type: nothing else to match at its runner.
            out.append(replace(hook, matcher=None))
    return tuple(out)


def settings_hook_warnings(settings: Settings) -> tuple[str, ...]:
    """What the settings' hooks hold that Membrane does not run."""
    return _read(settings.product_hooks)[1]


def _names(hook: CommandHook, agent: str) -> bool:
    return hook.matcher is None or re.fullmatch(hook.matcher, agent) is not None


@functools.lru_cache(maxsize=16)
def _read(files: tuple[tuple[str, str], ...]) -> tuple[tuple[CommandHook, ...], tuple[str, ...]]:
    hooks: list[CommandHook] = []
    warnings: list[str] = []
    for source, text in files:

        def fail(problem: str, hint: str, source: str = source) -> NoReturn:
            raise SettingsError(f"{source}: hooks: {problem}", path=source, key="hooks", hint=hint)

        def warn(code: str, message: str, source: str = source) -> None:
            warnings.append(f"{source}: {message}")

        hooks += read_hooks(
            json.loads(text), fail=fail, warn=warn, events=SETTINGS_HOOK_EVENTS, same_as={}
        )
    return tuple(hooks), tuple(warnings)
