"""The optional ``mcp`` SDK, imported only when an MCP feature is used (``membrane[mcp]``)."""

from __future__ import annotations

import importlib
from types import ModuleType

from membrane.errors import ExtraNotInstalled

__all__ = ["require"]


def require(module: str = "mcp", *, extra: str = "mcp", package: str = "mcp") -> ModuleType:
    """``import module``, or ``ExtraNotInstalled`` saying which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ExtraNotInstalled(
            f"this needs the {package!r} package, which is not installed: "
            f"pip install 'membrane[{extra}]'",
            extra=extra,
            package=package,
        ) from exc
