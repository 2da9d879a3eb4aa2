"""Membrane: delegate work from one agent to another under an exact, explainable boundary.

Everything public is re-exported here; ``__all__`` is sorted and complete.
"""

from __future__ import annotations

from membrane.agents.definition import UNSET, AgentDefinition, DefinitionWarning
from membrane.errors import MembraneError
from membrane.settings import Settings
from membrane.tools.spec import Tool, ToolContext

__version__ = "0.1.0"

__all__ = [
    "UNSET",
    "AgentDefinition",
    "DefinitionWarning",
    "MembraneError",
    "Settings",
    "Tool",
    "ToolContext",
    "__version__",
]
