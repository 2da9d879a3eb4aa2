"""The ``thinking`` levels a definition or call may ask for, and what each provider makes of them.

``off``, ``minimal``, ``low``, ``medium``, ``high``. An adapter maps a level onto the model's own
reasoning setting where it has one (OpenAI ``reasoning_effort``, Anthropic extended thinking's
``budget_tokens``) and otherwise drops it, saying so in ``ModelResponse.notes`` (the loop turns
a note into a ``model_note`` event, so the drop is recorded with the run).
"""

from __future__ import annotations

from typing import Final

__all__ = ["ANTHROPIC_BUDGETS", "THINKING_LEVELS", "dropped_note"]

THINKING_LEVELS: Final = ("off", "minimal", "low", "medium", "high")

#: Anthropic extended thinking: ``budget_tokens`` per level (the API's minimum is 1024).
ANTHROPIC_BUDGETS: Final = {"minimal": 1024, "low": 4096, "medium": 10000, "high": 32000}


def dropped_note(model: str, level: str) -> str:
    if level not in THINKING_LEVELS:
        return f"thinking={level!r} dropped: not a level ({', '.join(THINKING_LEVELS)}) for {model}"
    return f"thinking={level!r} dropped: {model} has no reasoning setting"
