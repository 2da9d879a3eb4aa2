"""``Spending``: what the agent loop asks before and after it spends (DESIGN rule 12).

The loop knows when a run spends: a model turn, the tokens of each response, a tool call. It
does not know the budgets; the runtime hands each child a ``Spending`` that draws on every
budget the run is under (its own and its ancestors'). Each method raises ``BudgetExceeded``
when the spending would cross one; the loop then ends the run with that error, after answering
the calls it did not run, so the transcript stays well formed.
"""

from __future__ import annotations

from typing import Protocol

from membrane.models.base import Usage

__all__ = ["Spending"]


class Spending(Protocol):
    """The budgets one run draws on."""

    def before_turn(self) -> None:
        """A model turn is about to be requested: counts one turn; refuses it when no turn or
        no token is left."""
        ...

    def after_response(self, usage: Usage, *, model: str | None = None) -> None:
        """A response of ``model`` (the name it answered as) arrived: its tokens and cost are
        counted (they were spent), then refused when they crossed a budget."""
        ...

    def before_tool_call(self) -> None:
        """A tool call is about to run: counts one call; refuses it when none is left."""
        ...
