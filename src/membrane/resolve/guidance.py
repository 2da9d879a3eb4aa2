"""The guidance text an agent is given about reaching Membrane from a shell.

One builder, so a child's system prompt (when it has ``Bash``) and the preamble of a CLI child
(the ``{guidance}`` slot of a ``CommandProvider`` template) carry the same body. Scheduled-work
guidance is added only when the agent can schedule; a worktree child's prompt states its write
boundary. Pure text: no I/O.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CLI_GUIDANCE_SECTION",
    "ENV_CLI_BIN_DIR",
    "ENV_CLI_PATH",
    "SCHEDULE_ACTION",
    "SCHEDULE_GUIDANCE",
    "WRITE_BOUNDARY_SECTION",
    "cli_guidance",
    "write_boundary",
]

CLI_GUIDANCE_SECTION: Final = "membrane:cli"
WRITE_BOUNDARY_SECTION: Final = "agent:write-boundary"
#: Set for every child Membrane launches: the path of the ``membrane`` command that launched it.
ENV_CLI_PATH: Final = "MEMBRANE_CLI_PATH"
#: Set by hosts that know only the folder the command is installed in.
ENV_CLI_BIN_DIR: Final = "MEMBRANE_CLI_BIN_DIR"
#: The action that schedules work; an agent that can call it gets the scheduled-work guidance.
SCHEDULE_ACTION: Final = "schedule_agent"

_BODY: Final = """\
# Membrane from the shell
You can reach Membrane, the runtime that started you, with the `membrane` command. Find it in \
this order: `command -v membrane`; else `$MEMBRANE_CLI_PATH`; else \
`$MEMBRANE_CLI_BIN_DIR/membrane`; else `python -m membrane`.
- Before you call a Membrane task blocked, run `membrane doctor` and `membrane actions list`: \
they say what this runtime offers you and what is missing.
- Prefer the relevant skill (the `membrane` skill, or another listed under # Skills) over long \
instructions in your prompt. An Agent Skill is a folder `<name>/SKILL.md` (frontmatter with \
`name` and `description`, then its instructions) with optional `references/`, `scripts/` and \
`assets/` folders beside it.
- Any process you start is yours to track: stop old, stale or finished ones before you finish."""

SCHEDULE_GUIDANCE: Final = """\
Scheduled work: for "in N minutes" use a relative one-shot (`--in 30m`, `delay_seconds`); for an \
absolute time give a timestamp with `Z` or an offset (`--at 2026-12-01T09:00:00+01:00`, \
`run_at`): a time without one is refused; `--cron` runs in the runtime host's local time zone \
unless `--tz` names another. Check the next run Membrane returns before you rely on it."""


def cli_guidance(*, can_schedule: bool = False) -> str:
    """The body every agent with a shell gets, plus scheduled-work guidance when it can
    schedule work."""
    return _BODY + ("\n" + SCHEDULE_GUIDANCE if can_schedule else "")


def write_boundary(folder: str) -> str:
    """A worktree child's write boundary, stated in its prompt."""
    return (
        "# Write boundary\n"
        f"You work in your own Git worktree, {folder}. Make edits and run mutating commands only "
        "inside it; reading files outside it for context is fine. Your work is committed to your "
        "own branch when you finish."
    )
