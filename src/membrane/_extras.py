"""Optional extras: a package that only some features need, imported when first used.

``require`` imports a module of an extra (``membrane[mcp]``, ``membrane[openai]``, ...) or
raises ``extra-not-installed`` saying which package is missing and which extra brings it, so
importing Membrane never needs the extras and a feature that does fails with one clear error.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from membrane.errors import ExtraNotInstalled

__all__ = ["require"]


def require(module: str, *, extra: str, package: str, feature: str = "this") -> ModuleType:
    """``import module``, or ``ExtraNotInstalled`` naming ``package`` and ``extra``;
    ``feature`` says what needed it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ExtraNotInstalled(
            f"{feature} needs the {package!r} package, which is not installed: "
            f"pip install 'membrane[{extra}]'",
            extra=extra,
            package=package,
        ) from exc
