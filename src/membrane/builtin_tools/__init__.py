"""The built-in tools a coding child works with: ``Read``, ``Glob``, ``Grep``, ``Bash``, ``Edit``,
``Write`` and, where a browser exists, ``BrowserPreview``.

Every path is resolved against the calling agent's checkout (``ToolContext.cwd``). Reads may
leave the checkout; the mutating tools (``Bash``, ``Edit``, ``Write``) refuse to change anything
outside it with ``path-outside-checkout``. That is capability shaping inside one trusted
process, not a sandbox.
"""

from __future__ import annotations

from typing import Protocol

from membrane.builtin_tools.bash import MAX_BASH_TIMEOUT, bash_tool
from membrane.builtin_tools.browser import browser_preview_tool, find_browser
from membrane.builtin_tools.edit import edit_tool
from membrane.builtin_tools.glob_tool import glob_tool
from membrane.builtin_tools.grep import grep_tool
from membrane.builtin_tools.read import read_tool
from membrane.builtin_tools.write import write_tool
from membrane.sandbox.runner import SandboxPolicy
from membrane.tools.spec import Tool

__all__ = [
    "ToolSink",
    "builtin_tools",
    "register_builtin_tools",
]


class ToolSink(Protocol):
    """Anything built-in tools can be registered with (a ``ToolRegistry``)."""

    def register(self, tool: Tool, *, replace: bool = False) -> None: ...


def builtin_tools(
    *,
    bash_timeout: float | None = None,
    bash_max_timeout: float = MAX_BASH_TIMEOUT,
    sandbox: SandboxPolicy | None = None,
) -> tuple[Tool, ...]:
    """The built-in tools available here, in ``membrane.vocabulary.BUILTIN_TOOL_NAMES`` order.

    ``BrowserPreview`` is included only when :func:`find_browser` finds a browser on ``PATH``
    at the time of the call. ``bash_timeout``/``bash_max_timeout`` and ``sandbox`` (the OS
    boundary; default: the strongest this machine offers) configure ``Bash`` (see
    :func:`~membrane.builtin_tools.bash.bash_tool`).
    """
    tools = [read_tool(), glob_tool(), grep_tool()]
    browser = find_browser()
    if browser is not None:
        tools.append(browser_preview_tool(browser))
    tools += [
        bash_tool(default_timeout=bash_timeout, max_timeout=bash_max_timeout, sandbox=sandbox),
        edit_tool(),
        write_tool(),
    ]
    return tuple(tools)


def register_builtin_tools(
    registry: ToolSink,
    *,
    replace: bool = False,
    tools: tuple[Tool, ...] | None = None,
) -> tuple[Tool, ...]:
    """Register the built-in tools (default: :func:`builtin_tools`) and return them.

    Raises whatever ``registry.register`` raises (``ToolSpecError`` on a duplicate unless
    ``replace``).
    """
    chosen = builtin_tools() if tools is None else tools
    for tool in chosen:
        registry.register(tool, replace=replace)
    return chosen
