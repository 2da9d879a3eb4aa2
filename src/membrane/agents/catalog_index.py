"""The catalog's index of winners: a definition per name, iterated in name order, updated
name by name at a cost that does not grow with the catalog.

A reload after k changed files touches k names. ``WinnerIndex`` keeps the winners in a dict
and their names in a sorted list: a changed definition replaces one dict slot, a new name is
inserted in its sorted place (``bisect``), a removed one deleted from it. Nothing is
re-sorted, and no per-definition Python work is done for the names that did not change.

``snapshot()`` hands out a read-only ``Definitions`` mapping that never changes afterwards
(a run's deployment keeps the catalog as it was when the run started). The index is copied on
write: the first update after a snapshot was handed out copies the dict and the list (two
C-level copies of pointer arrays, no per-definition Python work); updates with no snapshot
outstanding change them in place.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from typing import TypeVar, overload

from membrane.agents.definition import AgentDefinition

__all__ = ["Definitions", "WinnerIndex"]

T = TypeVar("T")


class Definitions(Mapping[str, AgentDefinition]):
    """The winning definitions by name, iterated in name order; read-only and unchanging."""

    __slots__ = ("_by_name", "_order")

    def __init__(self, by_name: dict[str, AgentDefinition], order: list[str]) -> None:
        self._by_name = by_name
        self._order = order

    def __getitem__(self, name: str) -> AgentDefinition:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    @overload
    def get(self, name: str, /) -> AgentDefinition | None: ...
    @overload
    def get(self, name: str, default: AgentDefinition, /) -> AgentDefinition: ...
    @overload
    def get(self, name: str, default: T, /) -> AgentDefinition | T: ...

    def get(self, name: str, default: object = None) -> object:
        return self._by_name.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __repr__(self) -> str:
        return f"Definitions({', '.join(self._order)})"


class WinnerIndex:
    """The winner of each name, changed one name at a time (see the module docstring)."""

    __slots__ = ("_by_name", "_order", "_snapshot")

    def __init__(self) -> None:
        self._by_name: dict[str, AgentDefinition] = {}
        self._order: list[str] = []
        self._snapshot: Definitions | None = None

    def get(self, name: str) -> AgentDefinition | None:
        return self._by_name.get(name)

    def items(self) -> Iterator[tuple[str, AgentDefinition]]:
        """``(name, winner)`` in name order."""
        by_name = self._by_name
        return ((name, by_name[name]) for name in self._order)

    def set(self, name: str, definition: AgentDefinition) -> None:
        """``definition`` wins ``name`` (a new name takes its sorted place)."""
        self._writable()
        if name not in self._by_name:
            bisect.insort(self._order, name)
        self._by_name[name] = definition

    def remove(self, name: str) -> None:
        """``name`` has no winner any more."""
        if name not in self._by_name:
            return
        self._writable()
        del self._by_name[name]
        del self._order[bisect.bisect_left(self._order, name)]

    def replace_all(self, winners: dict[str, AgentDefinition]) -> None:
        """Start again from ``winners`` (a full load): one sort."""
        self._by_name = dict(winners)
        self._order = sorted(winners)
        self._snapshot = None

    def snapshot(self) -> Definitions:
        """The winners as of now, unchanged by later updates."""
        if self._snapshot is None:
            self._snapshot = Definitions(self._by_name, self._order)
        return self._snapshot

    def _writable(self) -> None:
        if self._snapshot is not None:
            self._by_name = dict(self._by_name)
            self._order = list(self._order)
            self._snapshot = None
