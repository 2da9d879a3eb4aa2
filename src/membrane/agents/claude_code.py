"""The Claude Code dialect: ``~/.claude/agents`` and ``<project>/.claude/agents``.

Claude Code's fields, each with its own meaning:

* ``tools``: tool names, separated by commas or (with no comma) by spaces; ``Agent(a, b)`` (or
  the older ``Task(a, b)``) names the subagents this agent may start *when it is the main
  agent* (``claude --agent``), so it becomes ``allowed_subagents``, which the resolver honours
  for a top-level run only: in a subagent's ``tools`` it has no effect in Claude Code, and none
  here. ``Agent`` alone allows any (``*``). ``MultiEdit`` is ``Edit`` and ``LS`` is ``Glob``
  (the same authority). Left out (or empty), it means every tool in Claude Code; Membrane keeps
  its read-only default unless the deployment sets ``claude_code_omitted_tools = "inherit"``.
* Claude Code asks the user before every ``Bash``, ``Edit`` and ``Write`` call that no
  ``allow`` rule covers, so ``Bash`` and ``Edit`` (which governs ``Write``) get an ``ask``
  rule (source ``dialect:claude-code``) placed before the file's own rules: the permission
  mode then decides as in Claude Code (``acceptEdits`` runs edits, ``bypassPermissions``
  everything, ``dontAsk`` refuses) and a ``Bash(git log:*)`` in ``tools`` still runs without
  asking.
* ``disallowedTools``, ``maxTurns``, ``permissionMode``, ``background``: Membrane's
  ``disallowed_tools``, ``max_turns``, ``permission``, ``run_in_background``.
* ``model``: ``sonnet``, ``opus``, ``haiku`` are resolved through the deployment's model aliases;
  ``inherit`` is the parent's model.
* ``isolation``, ``skills``, ``color``: the same meaning as Membrane's.
* ``memory``: Membrane's field, kept in Claude Code's folders (``.claude/agent-memory/<name>/``
  and the rest: ``membrane.runtime.workspace.memory_file``).
* ``effort``: ``thinking`` (``max`` is ``xhigh``).
* ``mcpServers``: Membrane's ``mcp_servers`` (a configured server's name, or an inline entry).
* ``hooks``: Membrane's ``hooks``, run for this agent only, inside its sandbox and checkout
  (``membrane.agents.command_hooks``: ``PreToolUse``, ``PostToolUse``, ``UserPromptSubmit``,
  ``Stop``/``SubagentStop``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from membrane.agents.translation import Translation, tokens_of
from membrane.tools.permissions import PermissionRule

__all__ = ["ASKING_TOOLS", "claude_code_tools", "finish_claude_code", "translate_claude_code"]

#: The built-ins Claude Code asks about before each call no ``allow`` rule covers.
ASKING_TOOLS = ("Bash", "Edit")  # an Edit rule governs Write too

#: Claude Code keys that are Membrane fields under another name.
_RENAMES: Mapping[str, str] = {
    "maxTurns": "max_turns",
    "permissionMode": "permission",
    "background": "run_in_background",
    "disallowedTools": "disallowed_tools",
}
#: Claude Code tool names that are a Membrane built-in under another name (same authority).
_TOOLS: Mapping[str, str] = {"multiedit": "Edit", "ls": "Glob"}
_DELEGATION_WORDS = frozenset({"agent", "task"})
_EFFORT: Mapping[str, str] = {"low": "low", "medium": "medium", "high": "high", "max": "xhigh"}


def claude_code_tools(tokens: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """Claude Code ``tools`` tokens as Membrane tokens, and the subagents ``Agent(a, b)`` names.

    ``Agent`` (or its older name ``Task``) alone allows any subagent (``*``); ``Agent(a, b)``
    allows ``a`` and ``b``. ``None`` when the list names no delegation tool.
    """
    tools: list[str] = []
    subagents: list[str] | None = None
    for token in tokens:
        head, paren, rest = token.partition("(")
        word = head.strip().lower()
        if word in _DELEGATION_WORDS:
            names = [n.strip() for n in rest.rstrip(")").split(",") if n.strip()] if paren else []
            subagents = [*(subagents or []), *(names or ["*"])]
            continue
        mapped = _TOOLS.get(word)
        tools.append(mapped + (paren + rest if paren else "") if mapped else token)
    if subagents is not None and "*" in subagents:
        subagents = ["*"]
    return tools, subagents


def translate_claude_code(out: Translation, key: str, value: Any) -> bool:
    """Handle ``key`` if it is a Claude Code key; ``False`` leaves it to the Membrane fields."""
    if key in _RENAMES:
        target = _RENAMES[key]
        if target == "disallowed_tools" and (tokens := tokens_of(value)) is not None:
            value = claude_code_tools(tokens)[0] or "none"
        out.add(key, target, value)
        return True
    if key == "tools":
        if value is None or (isinstance(value, str) and not value.strip()):
            return True  # an empty ``tools:`` is Claude Code's "left out": every tool
        if isinstance(value, str) and "," not in value and "(" not in value:
            value = value.split()
        tokens = tokens_of(value)
        if tokens is None:
            return False  # the field rules refuse the shape, with their own message
        tools, subagents = claude_code_tools(tokens)
        out.add(key, "tools", tools if tools else "none")
        if subagents is not None:
            out.add(key, "allowed_subagents", subagents)
        return True
    if key == "effort":
        level = _EFFORT.get(value.strip().lower()) if isinstance(value, str) else None
        if level is None:
            out.ignore(key, value, "is not one of low, medium, high, max")
        else:
            out.add(key, "thinking", level)
        return True
    if key == "initialPrompt":
        out.ignore(key, value, "is the first prompt of a top-level Claude Code session")
        return True
    return False


def finish_claude_code(out: Translation, dialect: object) -> None:
    """Claude Code asks before each ``Bash``, ``Edit`` and ``Write`` call: an ``ask`` rule on
    ``Bash`` and on ``Edit`` (which governs ``Write``), ordered before the file's own rules so
    that a later ``allow`` pattern still admits and a ``deny`` still refuses."""
    for tool in ASKING_TOOLS:
        out.reader.rules.append(
            PermissionRule(
                tool, None, "ask", f"{tool}: ask (Claude Code asks)", "dialect:claude-code", False
            )
        )
