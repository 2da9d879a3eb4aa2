"""The built-in tools a coding child works with: ``Read``, ``Glob``, ``Grep``, ``Bash``, ``Edit``,
``Write`` and, where a browser exists, ``BrowserPreview``.

Every path is resolved against the calling agent's checkout (``ToolContext.cwd``). Reads stay in
the checkout, the read roots and the system's folders (``sandbox``'s ``read_paths``:
:mod:`membrane.sandbox.reads`); the mutating tools (``Bash``, ``Edit``, ``Write``) refuse to
change anything outside the checkout. Both refusals are ``path-outside-checkout``. That is
capability shaping inside one trusted process, not a sandbox.
"""

from __future__ import annotations

from typing import Protocol

# Not ``from ... import glob_tool``: the package attribute ``glob_tool`` is the submodule,
# bound when a Glob call first imports it.
from membrane.builtin_tools import declarations as _declared
from membrane.builtin_tools.bash import MAX_BASH_TIMEOUT, bash_tool
from membrane.sandbox.policy import SandboxPolicy
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

    ``BrowserPreview`` is included only when a browser is on ``PATH`` at the time of the call
    (:func:`~membrane.builtin_tools.declarations.find_browser`). ``bash_timeout``,
    ``bash_max_timeout`` and ``sandbox`` (the OS boundary; default: the strongest this machine
    offers) configure ``Bash`` (see :func:`~membrane.builtin_tools.bash.bash_tool`); the
    ``sandbox``'s ``read_paths`` are the read roots of ``Read``, ``Glob`` and ``Grep`` too.
    """
    roots = sandbox.read_paths if sandbox is not None else ()
    tools = [
        _declared.read_tool(read_paths=roots),
        _declared.glob_tool(read_paths=roots),
        _declared.grep_tool(read_paths=roots),
    ]
    browser = _declared.find_browser()
    if browser is not None:
        tools.append(_declared.browser_preview_tool(browser))
    tools += [
        bash_tool(default_timeout=bash_timeout, max_timeout=bash_max_timeout, sandbox=sandbox),
        _declared.edit_tool(),
        _declared.write_tool(),
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
