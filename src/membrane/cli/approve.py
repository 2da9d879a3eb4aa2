"""Answering ``ask`` permission rules from the terminal that runs ``membrane run``.

When standard input is a terminal, ``membrane run`` passes a ``TerminalApprover`` to the
runtime: each call an ``ask`` rule holds pauses the live tree, prints the agent, the tool, what
it would run and the rule, and reads ``y``/``yes`` (anything else refuses). Prompts come one at a
time, whichever child asks. Without a terminal (a pipe, ``--background``, a script) there is no
approver, and such a call fails with ``approval-unavailable``: no one can answer it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

import anyio

from membrane.tools.permissions import ApprovalRequest

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

__all__ = ["TerminalApprover", "terminal_approver"]


class TerminalApprover:
    """Asks on ``console`` and reads the answer from ``stdin``. ``live`` (set once the live tree
    exists) is paused while the question is on screen."""

    def __init__(self, *, console: Console, stdin: TextIO) -> None:
        self._console = console
        self._stdin = stdin
        self._lock = anyio.Lock()
        self.live: Live | None = None

    async def __call__(self, request: ApprovalRequest) -> bool:
        async with self._lock:
            live = self.live
            if live is not None:
                live.stop()
            try:
                self._console.print(_question(request), end="")
                line = await anyio.to_thread.run_sync(self._stdin.readline, abandon_on_cancel=True)
            finally:
                if live is not None:
                    live.start()
        from rich.text import Text

        answer = line.strip().lower() in ("y", "yes")
        self._console.print(Text("approved" if answer else "refused", style="dim"))
        return answer


def _question(request: ApprovalRequest) -> Text:
    from rich.text import Text

    text = Text()
    text.append(f"{request.agent} asks to run {request.tool}", style="bold")
    if request.subject:
        text.append(f": {request.subject}")
    text.append(f"\n  needs approval: {request.reason}\n", style="dim")
    text.append("  allow it? [y/N] ", style="bold")
    return text


def terminal_approver() -> TerminalApprover | None:
    """An approver asking on stderr and reading this process's terminal, or ``None`` when stdin
    is not one (Rich is imported only then)."""
    stdin = sys.stdin
    if stdin is None or not stdin.isatty():
        return None
    from rich.console import Console

    return TerminalApprover(console=Console(stderr=True, soft_wrap=True), stdin=stdin)
