"""The optional ``mcp`` SDK, imported only when an MCP feature is used (``membrane[mcp]``)."""

from __future__ import annotations

from types import ModuleType

from membrane import _extras

__all__ = ["require"]


def require(module: str = "mcp", *, package: str = "mcp") -> ModuleType:
    """``import module``, or ``ExtraNotInstalled`` saying the ``mcp`` extra brings it."""
    return _extras.require(module, extra="mcp", package=package)
