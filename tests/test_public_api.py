"""The package ``__init__`` re-exports the public API with a sorted, complete ``__all__``."""

from __future__ import annotations

import re
import types

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
