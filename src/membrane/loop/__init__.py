"""The agent loop: each turn narrows the active tool set from the live view, each call is vetoed
unless the view holds it, hooks run in Pi's order, and a mention clone routes ``@NAME``."""

from membrane.loop.agent_loop import AgentLoop
from membrane.loop.outcome import ChildOutcome

__all__ = ["AgentLoop", "ChildOutcome"]
