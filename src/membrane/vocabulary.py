"""Fixed names: the one place for every name list Membrane matches against.

Built-in tool names, the delegation tools, the inherit deny list, the extension hook events and
the statuses of a run are each defined here once; every other module imports them. Nothing here
does I/O or imports another Membrane module, so every room may use it.
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = [
    "ASK_PARENT_TOOL",
    "ASSIGNABLE_TOOLS",
    "BUILTIN_TOOL_NAMES",
    "DELEGATION_TOOLS",
    "END_STATES",
    "FINISHED_STATES",
    "HOOK_EVENTS",
    "INHERIT_DENY_TOOLS",
    "MUTATING_DELEGATION_TOOLS",
    "MUTATING_TOOLS",
    "OK_STATES",
    "READ_ONLY_TOOLS",
    "RUN_STATUSES",
    "SPAWN_FIELDS",
    "SPAWN_TOOL",
    "TOOL_CHOICE_MODES",
    "WRITE_TOOLS",
    "EndStatus",
    "HookEventName",
    "RunStatus",
    "canonical_builtin_name",
]

# -- built-in tools ---------------------------------------------------------------------------

#: Every built-in tool name, canonical spelling, in the order seed 000 lists them.
BUILTIN_TOOL_NAMES: Final[tuple[str, ...]] = (
    "Read",
    "Glob",
    "Grep",
    "BrowserPreview",
    "Bash",
    "Edit",
    "Write",
)
#: SUBAGENT_ASSIGNABLE_TOOLS of seed 000: what ``tools: "*"`` means and what ``inherit`` extras
#: may name.
ASSIGNABLE_TOOLS: Final[tuple[str, ...]] = BUILTIN_TOOL_NAMES
#: The built-in tools that change files or run commands.
MUTATING_TOOLS: Final[frozenset[str]] = frozenset({"Bash", "Edit", "Write"})
#: Tools whose presence makes an agent's memory read-write.
WRITE_TOOLS: Final[frozenset[str]] = frozenset({"Write", "Edit"})
#: The default grant when a definition leaves ``tools`` out (seed 000, decision 5).
READ_ONLY_TOOLS: Final[tuple[str, ...]] = ("Read", "Glob", "Grep")

_BY_LOWER: Final = {name.lower(): name for name in BUILTIN_TOOL_NAMES}


def canonical_builtin_name(token: str) -> str | None:
    """The canonical built-in name ``token`` spells in any case (``"read"`` -> ``"Read"``).

    ``None`` when ``token`` names no built-in tool. Surrounding whitespace is ignored.
    """
    return _BY_LOWER.get(token.strip().lower())


# -- delegation -------------------------------------------------------------------------------

#: Nested delegation tools; only ``allowed_subagents`` brings them to a child.
DELEGATION_TOOLS: Final[tuple[str, ...]] = (
    "Task",
    "TaskWait",
    "TaskList",
    "TaskStop",
    "TaskMessage",
)
#: The delegation tools that change state (start, stop or message a child); the others read.
MUTATING_DELEGATION_TOOLS: Final[frozenset[str]] = frozenset({"Task", "TaskStop", "TaskMessage"})
#: The delegation tool that starts a child (an ``@agent`` mention goes through it).
SPAWN_TOOL: Final = "Task"
#: The tool a child whose definition sets ``may_ask_parent: true`` asks its parent with; like
#: the delegation tools it is the child's own, bound to its run, and never inherited.
ASK_PARENT_TOOL: Final = "AskParent"

#: The ``tool_choice`` words; any other value names a tool.
TOOL_CHOICE_MODES: Final[tuple[str, ...]] = ("auto", "required", "none")
#: Seed 000, decision 2: never inherited.
INHERIT_DENY_TOOLS: Final[frozenset[str]] = frozenset(
    {*DELEGATION_TOOLS, "EnterPlanMode", "EnterGoalMode", "asktool", "new_context", "ToolSearch"}
)

# -- extension hooks --------------------------------------------------------------------------

HookEventName = Literal[
    "session_start", "before_agent_start", "before_tool_call", "turn_end", "session_shutdown"
]
#: Lifecycle events an extension may hook, in the order a run meets them.
HOOK_EVENTS: Final[tuple[HookEventName, ...]] = (
    "session_start",
    "before_agent_start",
    "before_tool_call",
    "turn_end",
    "session_shutdown",
)

# -- invocation fields ------------------------------------------------------------------------

#: DESIGN rule 1: the spawn-time fields, which resolve as ``frontmatter ?? call ?? default``. A
#: delegation call may set each (with its ``description``); ``EffectiveAuthority.invocation``
#: shows each (with ``permission``), in this order.
SPAWN_FIELDS: Final[tuple[str, ...]] = (
    "model",
    "thinking",
    "max_turns",
    "inherit_context",
    "run_in_background",
    "isolated",
    "isolation",
)

# -- run statuses -----------------------------------------------------------------------------

#: How a run ends: the agent loop's, a provider's and the runtime's end states are these.
EndStatus = Literal["completed", "wrapped_up", "stopped", "aborted", "error"]
#: A run's status: published and waiting for a slot, running, or one of the end states.
RunStatus = Literal["queued", "running", "completed", "wrapped_up", "stopped", "aborted", "error"]
END_STATES: Final[frozenset[str]] = frozenset(
    {"completed", "wrapped_up", "stopped", "aborted", "error"}
)
#: The statuses a run leaves behind for good: its end states, and ``interrupted`` (the sweeper's
#: mark of a run whose process died; a resume continues it). Retention deletes only these.
FINISHED_STATES: Final[frozenset[str]] = END_STATES | {"interrupted"}
#: The end states that count as success.
OK_STATES: Final[frozenset[str]] = frozenset({"completed", "wrapped_up"})
RUN_STATUSES: Final[tuple[str, ...]] = (
    "queued",
    "running",
    "completed",
    "wrapped_up",
    "stopped",
    "aborted",
    "error",
)
