"""Each public tier re-exports its API with a sorted, complete ``__all__``, and every Membrane type
a public signature takes or returns is exported by one of the tiers."""

from __future__ import annotations

import inspect
import re
import types
import typing

import pytest

import membrane
import membrane.extensions
import membrane.lowlevel
import membrane.testing

TIERS = [membrane, membrane.extensions, membrane.lowlevel, membrane.testing]
_IDS = [tier.__name__ for tier in TIERS]


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


@pytest.mark.parametrize("tier", TIERS, ids=_IDS)
def test_all_is_sorted(tier: types.ModuleType) -> None:
    assert tier.__all__ == sorted(tier.__all__, key=_isort_key)


@pytest.mark.parametrize("tier", TIERS, ids=_IDS)
def test_all_has_no_duplicates(tier: types.ModuleType) -> None:
    assert len(set(tier.__all__)) == len(tier.__all__)


@pytest.mark.parametrize("tier", TIERS, ids=_IDS)
def test_every_name_in_all_is_importable(tier: types.ModuleType) -> None:
    missing = [name for name in tier.__all__ if not hasattr(tier, name)]
    assert missing == []


@pytest.mark.parametrize("tier", TIERS, ids=_IDS)
def test_every_public_name_defined_in_the_tier_is_in_all(tier: types.ModuleType) -> None:
    public = {
        name
        for name, value in vars(tier).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and type(value).__module__ != "__future__"  # ``from __future__ import annotations``
    }
    assert sorted(public - set(tier.__all__)) == []


def test_no_name_is_exported_by_two_tiers() -> None:
    seen: dict[str, str] = {}
    twice = []
    for tier in TIERS:
        for name in tier.__all__:
            if name in seen:
                twice.append(f"{name}: {seen[name]} and {tier.__name__}")
            seen[name] = tier.__name__
    assert twice == []


def test_the_top_level_stays_small() -> None:
    assert 30 <= len(membrane.__all__) <= 42


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


def test_every_membrane_type_in_a_public_signature_is_exported_by_a_tier() -> None:
    exported = {getattr(tier, name) for tier in TIERS for name in tier.__all__}
    missing: dict[str, set[str]] = {}
    for tier in TIERS:
        for name in tier.__all__:
            value = getattr(tier, name)
            members = [(name, value)]
            if inspect.isclass(value):
                own = dict(vars(value))
                members = [
                    (f"{name}.{attr}", member)
                    for attr, member in own.items()
                    if (callable(member) or isinstance(member, classmethod | staticmethod))
                    and (not attr.startswith("_") or attr == "__init__")
                ]
                members.append((name, value))
            for label, member in members:
                wrapped = isinstance(member, classmethod | staticmethod)
                if label in _INTERNAL_CONSTRUCTORS or not (callable(member) or wrapped):
                    continue
                if isinstance(member, types.GenericAlias):
                    continue  # a type alias such as ``JSONObject``: callable, no signature
                target = member.__func__ if wrapped else member
                found: set[type] = set()
                for hint in typing.get_type_hints(target).values():
                    _membrane_types(hint, found)
                for kind in found:
                    private = kind.__name__.startswith("_")
                    if (
                        kind not in exported
                        and not private
                        and kind.__module__ != "membrane.errors"
                    ):
                        missing.setdefault(f"{kind.__module__}.{kind.__qualname__}", set()).add(
                            label
                        )
    assert missing == {}
