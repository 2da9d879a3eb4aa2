"""Requirements: tools that work only where something else is present.

A tool may declare what it needs in ``Tool.requires`` (for example ``"computer-use"``, a
backend that drives a desktop). Whoever brings such a thing up says so with
``registry.requirements.provide(NAME)`` (an extension: ``ext.provide(NAME)``), and
``withdraw(NAME)`` when it goes away. Every scope leaves out a global tool while one of its
requirements is not provided (``Scope``), so a child or a socket caller is never offered a
tool that could only fail (seed 002, "a visibility filter removes
computer-use tools when those backends are unavailable").

The second half, "or when the caller lacks the permission", belongs to the caller's role: a
role's ``permissions`` name the requirements its callers may use (``RoleRestriction``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from membrane.tools.spec import Tool

__all__ = ["Requirements"]


class Requirements:
    """The requirements provided now in one deployment; ``version`` moves with every change."""

    __slots__ = ("_listeners", "_provided", "version")

    def __init__(self, provided: Iterable[str] = ()) -> None:
        self._provided = set(provided)
        self._listeners: list[Callable[[str], None]] = []
        self.version = 0

    def subscribe(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(name)`` after each change (views may have moved)."""
        self._listeners.append(listener)

    def provide(self, name: str) -> None:
        if name not in self._provided:
            self._provided.add(name)
            self._changed(name)

    def withdraw(self, name: str) -> None:
        if name in self._provided:
            self._provided.discard(name)
            self._changed(name)

    def _changed(self, name: str) -> None:
        self.version += 1
        for listener in list(self._listeners):
            listener(name)

    def available(self, name: str) -> bool:
        return name in self._provided

    def admits(self, tool: Tool) -> bool:
        """Whether every requirement of ``tool`` is provided now."""
        return all(name in self._provided for name in tool.requires)

    def provided(self) -> frozenset[str]:
        return frozenset(self._provided)
