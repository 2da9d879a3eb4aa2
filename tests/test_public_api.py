"""The package ``__init__`` re-exports the public API with a sorted, complete ``__all__``."""

from __future__ import annotations

import inspect
import re
import types
import typing

import membrane


def _isort_key(name: str) -> tuple[int, list[int | str]]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then everything else; naturally."""
    if name.isupper() and len(name) > 1:
        group = 0
    elif name[:1].isupper():
        group = 1
    else:
        group = 2
    parts = [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
    return group, parts


def test_all_is_sorted() -> None:
    assert membrane.__all__ == sorted(membrane.__all__, key=_isort_key)


def test_all_has_no_duplicates() -> None:
    assert len(set(membrane.__all__)) == len(membrane.__all__)


def test_every_name_in_all_is_importable() -> None:
    missing = [name for name in membrane.__all__ if not hasattr(membrane, name)]
    assert missing == []


def test_every_public_name_defined_in_the_package_is_in_all() -> None:
    public = {
        name
        for name, value in vars(membrane).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and type(value).__module__ != "__future__"  # ``from __future__ import annotations``
    }
    assert sorted(public - set(membrane.__all__)) == []


def _membrane_types(hint: object, found: set[type]) -> None:
    if isinstance(hint, type) and hint.__module__.startswith("membrane."):
        found.add(hint)
    for arg in typing.get_args(hint):
        _membrane_types(arg, found)


#: Constructors that only Membrane itself calls; their parameter types are implementation.
_INTERNAL_CONSTRUCTORS = {
    "DefinitionRestriction.__init__",
    "EventStream.__init__",
    "ToolView.__init__",  # views are made by Scope.view() and ToolView.of()
}


def test_every_membrane_type_in_a_public_signature_is_exported() -> None:
    exported = {getattr(membrane, name) for name in membrane.__all__}
    missing: dict[str, set[str]] = {}
    for name in membrane.__all__:
        value = getattr(membrane, name)
        members = [(name, value)]
        if inspect.isclass(value):
            members = [
                (f"{name}.{attr}", member)
                for attr, member in vars(value).items()
                if (callable(member) or isinstance(member, classmethod | staticmethod))
                and (not attr.startswith("_") or attr == "__init__")
            ]
            members.append((name, value))
        for label, member in members:
            wrapped = isinstance(member, classmethod | staticmethod)
            if label in _INTERNAL_CONSTRUCTORS or not (callable(member) or wrapped):
                continue
            if isinstance(member, types.GenericAlias):
                continue  # a type alias such as ``JSONObject``: callable, but no signature
            target = member.__func__ if isinstance(member, classmethod | staticmethod) else member
            found: set[type] = set()
            for hint in typing.get_type_hints(target).values():
                _membrane_types(hint, found)
            for kind in found:
                private = kind.__name__.startswith("_")
                if kind not in exported and not private and kind.__module__ != "membrane.errors":
                    missing.setdefault(f"{kind.__module__}.{kind.__qualname__}", set()).add(label)
    assert missing == {}
