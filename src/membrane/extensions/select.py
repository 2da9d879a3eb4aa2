"""Which extensions a child loads: discovered, then filtered by ``extensions``, then excluded.

An MCP server counts as an extension named after the server: its tools have origin
``mcp:SERVER`` and names ``mcp__SERVER__TOOL``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from membrane.tools.spec import Tool

__all__ = ["ExtensionSelection", "extension_of", "select_extensions"]

ExtensionState = Literal["loaded", "excluded", "not loaded"]


def extension_of(tool: Tool) -> str | None:
    """The extension a tool belongs to, or ``None`` for builtins and host/scope tools."""
    origin = tool.origin
    if origin.startswith("extension:"):
        return origin.removeprefix("extension:") or None
    if origin.startswith("mcp:"):
        return origin.removeprefix("mcp:") or None
    if tool.name.startswith("mcp__"):
        parts = tool.name.split("__", 2)
        if len(parts) == 3 and parts[1]:
            return parts[1]
    return None


@dataclass(frozen=True, slots=True)
class ExtensionSelection:
    """The child's extension decision, kept symbolic so that it also answers for names that
    appear later (a server the parent gains while an inheriting child runs).

    ``mode`` is ``all`` (``extensions: true``, left out or ``*``), ``named`` (a list) or
    ``none`` (``false``, or ``isolated: true``). ``excluded`` always wins.
    """

    mode: Literal["all", "named", "none"]
    named: frozenset[str]
    excluded: frozenset[str]
    discovered: frozenset[str]
    isolated: bool = False

    def state(self, extension: str, *, via_parent: bool = False) -> ExtensionState:
        """``via_parent``: the tool reaches the child through ``inherit``, so an extension the
        parent holds counts as discovered even when this deployment did not discover it."""
        if extension in self.excluded:
            return "excluded"
        if self.mode == "none":
            return "not loaded"
        if self.mode == "named" and extension not in self.named:
            return "not loaded"
        if extension not in self.discovered and not via_parent:
            return "not loaded"
        return "loaded"

    def loaded(self, extra: Iterable[str] = ()) -> tuple[str, ...]:
        """Loaded names among the discovered ones (plus ``extra``, the parent's), sorted."""
        names = self.discovered | frozenset(extra)
        return tuple(sorted(n for n in names if self.state(n, via_parent=True) == "loaded"))

    def excluded_names(self, extra: Iterable[str] = ()) -> tuple[str, ...]:
        names = self.discovered | frozenset(extra)
        return tuple(sorted(n for n in names if n in self.excluded))


def select_extensions(
    chosen: bool | Sequence[str] | None,
    *,
    exclude: Sequence[str] = (),
    discovered: Iterable[str],
    isolated: bool,
) -> tuple[ExtensionSelection, list[str]]:
    """Apply a definition's ``extensions`` (``chosen``; ``None`` when the file leaves it out)
    then its ``exclude_extensions``; ``isolated`` loads none."""
    found = frozenset(discovered)
    warnings: list[str] = []
    named: frozenset[str] = frozenset()
    mode: Literal["all", "named", "none"]
    if isolated:
        mode = "none"
        if chosen is True or (not isinstance(chosen, bool) and chosen):
            warnings.append("isolated: true loads no extensions; the extensions field is ignored")
    elif chosen is None or chosen is True:
        mode = "all"
    elif chosen is False:
        mode = "none"
    elif "*" in chosen:
        mode = "all"
    else:
        mode = "named"
        named = frozenset(chosen)
        for name in sorted(named - found):
            warnings.append(
                f"extensions: {name!r} is not a discovered extension; nothing is loaded for it"
            )
    excluded = frozenset(exclude)
    return (
        ExtensionSelection(
            mode=mode, named=named, excluded=excluded, discovered=found, isolated=isolated
        ),
        warnings,
    )
