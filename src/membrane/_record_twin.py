"""A record's ``__dataclass_fields__`` (``membrane._record``), made by ``dataclasses`` from a
dataclass with the same fields the first time anything reads it (``dataclasses.fields``,
``replace``, ``asdict``), and imported only then; it imports nothing of ``membrane._record``."""

from __future__ import annotations

TYPE_CHECKING = False  # not ``typing``'s: this module imports nothing it does not use
if TYPE_CHECKING:
    from typing import Any

__all__ = ["dataclass_fields"]

#: The dataclasses made for ``__dataclass_fields__``, one per record class read so.
_TWINS: list[type] = []


def dataclass_fields(owner: type, *, frozen: bool, missing: object) -> object:
    """The ``__dataclass_fields__`` of the record class ``owner``, set on it (with its
    ``__dataclass_params__``) in place of the descriptor that asked; ``missing`` is
    ``membrane._record.MISSING`` (no default)."""
    import dataclasses

    annotations = owner.__dict__["__annotations__"]  # noqa: RUF063 - no ``inspect`` here
    kept: dict[str, object] = {}
    body: dict[str, object] = {"__module__": owner.__module__, "__annotations__": kept}
    for f in owner.__dict__["_record_declared"]:
        kept[f.name] = annotations[f.name]
        options: dict[str, Any] = {
            "init": f.init,
            "repr": f.repr,
            "compare": f.compare,
            "hash": f.hash,
            "kw_only": f.kw_only,
        }
        if f.default_factory is not missing:
            options["default_factory"] = f.default_factory
        elif f.default is not missing:
            options["default"] = f.default
        body[f.name] = dataclasses.field(**options)
    twin: Any = dataclasses.dataclass(frozen=frozen)(type(owner.__name__, (), body))
    # Kept: a class is a reference cycle, so a dropped twin would be left to the garbage
    # collector (and found by a cycle count taken while a child runs).
    _TWINS.append(twin)
    type.__setattr__(owner, "__dataclass_fields__", twin.__dataclass_fields__)
    type.__setattr__(owner, "__dataclass_params__", twin.__dataclass_params__)
    return twin.__dataclass_fields__
