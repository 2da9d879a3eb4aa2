"""Which calls of one turn may run at the same time.

The calls a model makes in one turn run concurrently, except where two could touch the same
thing. Each call *claims* what it writes:

* nothing, for a tool that writes nothing or keeps its own order (``Read``, ``Grep``, ``Task``
  and the other delegation tools, a host's tool that does not say ``sequential``, an MCP
  server's tool): it overlaps with everything;
* one path, for a built-in tool that writes the file its arguments name (``Edit``, ``Write``):
  it waits for every earlier call of the turn that claims that path or everything;
* everything, for a built-in tool whose writes its arguments do not say (``Bash``,
  ``run_code``) and for any tool declared ``sequential``: it waits for every earlier call that
  claims anything, and every later writing call waits for it.

A call waits only for calls the model wrote before it, so the order of writes is the model's and
no two calls can wait for each other.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from membrane.tools.spec import Tool
from membrane.vocabulary import MUTATING_DELEGATION_TOOLS

__all__ = ["EVERYTHING", "claim", "conflict"]

#: The claim of a call whose writes its arguments do not bound.
EVERYTHING: Final = "*"
#: The arguments a built-in path tool names its file by.
_PATH_ARGUMENTS: Final = ("file_path", "path")


def claim(tool: Tool | None, arguments: Mapping[str, object], cwd: Path | None) -> str | None:
    """What the call of ``tool`` with ``arguments`` writes: ``None`` (nothing that another call
    of its turn must wait for), a path, or ``EVERYTHING``."""
    if tool is None:
        return None  # not in the view: vetoed at once, it touches nothing
    if tool.sequential:
        return EVERYTHING
    if not tool.mutating or tool.origin != "builtin" or tool.name in MUTATING_DELEGATION_TOOLS:
        return None
    for key in _PATH_ARGUMENTS:
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return os.path.normpath(os.path.join(cwd or os.getcwd(), os.path.expanduser(value)))
    return EVERYTHING


def conflict(first: str | None, second: str | None) -> bool:
    """Whether two calls with these claims may not overlap."""
    if first is None or second is None:
        return False
    return first == second or EVERYTHING in (first, second)
