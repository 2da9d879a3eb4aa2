"""Which extensions a child loads: discovered, then filtered by ``extensions``, then excluded.

An MCP server counts as an extension named after the server: its tools have origin
``mcp:SERVER`` and names ``mcp__SERVER__TOOL``.

An ``extensions`` list may also name extension files by path (seed 003: "an array keeps
matching canonical names and adds explicit paths"), relative to the project folder. The
workspace loads each path a definition names (``ExtensionPaths``); such an extension is
discovered only for the definitions that name it, and a path that is not an extension refuses
the definition with ``extension-invalid``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from membrane.errors import ExtensionError
from membrane.tools.spec import Tool

__all__ = [
    "ExtensionPaths",
    "ExtensionSelection",
    "extension_of",
    "extension_path",
    "is_extension_path",
    "select_extensions",
]

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


def is_extension_path(token: str) -> bool:
    """Whether an ``extensions`` entry names a file (``tools/audit.py``, ``./x.py``, ``~/e.py``)
    rather than an extension's canonical name, which never holds a ``/`` or ends in ``.py``."""
    text = token.strip()
    return text.endswith(".py") or "/" in text or text.startswith("~")


def extension_path(token: str, *, project: str | None) -> str:
    """Where a path entry points: ``~`` expanded, relative to ``project``, normalised."""
    path = os.path.expanduser(token.strip())
    if not os.path.isabs(path) and project is not None:
        path = os.path.join(project, path)
    return os.path.normpath(path)


@dataclass(frozen=True, slots=True)
class ExtensionPaths:
    """The extension paths the definitions name, as the workspace loaded them.

    ``loaded`` maps each path (``extension_path``) to the name of the extension loaded from it;
    ``problems`` maps a path that is not an extension to why; ``only`` are the names loaded
    only because a definition named their path (discovered for those definitions alone).
    """

    loaded: Mapping[str, str] = field(default_factory=dict)
    problems: Mapping[str, str] = field(default_factory=dict)
    only: frozenset[str] = frozenset()

    def choose(
        self, chosen: bool | Sequence[str] | None, *, project: str | None, foreign: bool = False
    ) -> tuple[bool | Sequence[str] | None, frozenset[str], list[str]]:
        """``chosen`` with each path replaced by its extension's name, the path-only names that
        stay hidden from this definition, and warnings. ``ExtensionError`` for a path that is
        not a loaded extension; in a ``foreign`` file (another product's dialect, whose paths
        name that product's extensions) such a path is dropped with a warning instead."""
        if isinstance(chosen, bool) or chosen is None:
            return chosen, self.only, []
        names: list[str] = []
        warnings: list[str] = []
        for token in chosen:
            if not is_extension_path(token):
                names.append(token)
                continue
            path = extension_path(token, project=project)
            name = self.loaded.get(path)
            if name is None and foreign:
                warnings.append(
                    f"extensions: {token!r} names another product's extension file; Membrane "
                    "loads none for it"
                )
                continue
            if name is None:
                why = self.problems.get(path, "no workspace loaded it (Workspace.open loads them)")
                raise ExtensionError(
                    f"extensions: {token!r} is not an extension: {why}",
                    path=path,
                    hint="name a Python file with a setup(ext) function, relative to the project",
                )
            names.append(name)
        return tuple(names), self.only - frozenset(names), warnings
