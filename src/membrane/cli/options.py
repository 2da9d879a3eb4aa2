"""Options that several commands share, declared once (typer's ``Option``)."""

from __future__ import annotations

from typer import Option

__all__ = [
    "BUDGET_HELP",
    "HEADLESS_OPTION",
    "MODEL_HELP",
    "ROLE_OPTION",
    "SOCKET_OPTION",
    "STATE_OPTION",
]

MODEL_HELP = (
    "scripted:PATH, openai:MODEL, anthropic:MODEL, or a [models]/[model_aliases] name "
    "(default: the default_model setting, else the agent's own model:)."
)

#: ``--headless``: this process; no machine runtime is used or started.
HEADLESS_OPTION = Option(
    "--headless",
    help="Run in this process: no machine runtime (membrane serve) is used or started.",
)
#: ``--socket PATH``: the machine runtime to use.
SOCKET_OPTION = Option("--socket", help="The machine runtime's socket (default: $MEMBRANE_SOCKET).")
#: ``--role``: the trusted role the run's view is narrowed by (the owner's choice).
ROLE_OPTION = Option(
    "--role",
    help="Run under this role of the settings (default: $MEMBRANE_ROLE, else the runtime's "
    "owner role, else your own authority).",
)

BUDGET_HELP = (
    "What the run and its whole subtree may spend, e.g. tokens=200000,children=20,seconds=900 "
    "(kinds: tokens, cost in dollars, turns, tool_calls, children, seconds); within the "
    "settings' [budget]."
)
#: ``--state PATH|URL``: the store file (or PostgreSQL database) instead of the project's own.
STATE_OPTION = Option(
    "--state",
    help="The state file, or a postgresql:// URL (default: $MEMBRANE_STATE_URL, else the "
    "settings' state_url, else $MEMBRANE_HOME/projects/<project-id>/state.db).",
)
