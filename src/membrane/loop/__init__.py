"""The agent loop: each turn narrows the active tool set from the live view, each call is vetoed
unless the view holds it, hooks run in Pi's order, and a mention clone routes ``@NAME``."""

from __future__ import annotations

import typing

from membrane._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
    from membrane.loop.agent_loop import AgentLoop
    from membrane.loop.outcome import ChildOutcome

__all__ = ["AgentLoop", "ChildOutcome"]

# Nothing is imported until a name is first used, so importing the package (and the CLI's
# start) pays only for what is touched.
__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "AgentLoop": "membrane.loop.agent_loop",
        "ChildOutcome": "membrane.loop.outcome",
    },
    globals(),
)
