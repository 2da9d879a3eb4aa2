"""``ChildOutcome``: how one child's run ended, the one result type that flows through.

The agent loop returns it, a provider's child returns it (``ProviderChild.run``), and the
runtime's ``RunResult`` carries it unchanged beside the run's id, agent and worktree. No layer
copies it field by field into a look-alike type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from membrane.json_types import JSONObject, JSONValue
from membrane.models.base import Message, Usage
from membrane.vocabulary import OK_STATES, EndStatus

__all__ = ["NO_USAGE", "ChildOutcome"]

#: No tokens: one shared value (``Usage`` is immutable), not one object per run that has none.
NO_USAGE: Final = Usage()


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    """How a child's run ended.

    ``text`` is the last assistant text; ``structured`` the parsed final answer when a
    ``response_schema`` was given. An error is never an empty success: ``status="error"``
    carries ``error`` as ``{"code", "message", ...}``. ``messages`` is the whole conversation
    when the transport keeps it here (the in-process loop does; a resume continues from it).
    """

    status: EndStatus
    text: str = ""
    turns: int = 0
    usage: Usage = NO_USAGE
    #: What its model responses cost, in micro-dollars (``membrane.models.prices``); ``None``
    #: when unknown: a response whose model has no known price, or a transport that does not
    #: say (never counted as 0).
    cost: int | None = None
    error: JSONObject | None = None
    structured: JSONValue = None
    messages: Sequence[Message] = ()

    @property
    def ok(self) -> bool:
        return self.status in OK_STATES
