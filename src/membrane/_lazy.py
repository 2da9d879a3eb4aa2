"""Package exports imported on first use (PEP 562), so that importing a package, or starting
the CLI, costs only the modules that are actually touched."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not ``typing``'s: importing a package does not import ``typing``
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, object]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__``: ``exports`` maps each public name to the
    module that defines it; a name, once imported, is kept in the package's ``namespace``."""

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
