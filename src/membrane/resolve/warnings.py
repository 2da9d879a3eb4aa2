"""Explain's warnings as objects: ``{code, message, file, line}``, the one shape of every command.

A resolution collects its warnings as sentences (``EffectiveAuthority.warnings``), which the text
output prints as they are. ``warning_objects`` gives each one the shape the other commands'
``--json`` use: a definition's own warnings (a repair, an unknown key, a dialect's mapping) keep
the code, file and line their reader gave them; a warning of the resolution itself (a selector
that selects nothing, a depth at the cap, a model no alias maps) gets the code of its kind and the
definition's file, with no line (it is about the definition as resolved, not one line of it),
unless it is written as a warning of one line of the file (``model-fallback``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from membrane.agents.definition import DefinitionWarning
from membrane.json_types import JSONDict

__all__ = ["RESOLUTION_WARNING_CODES", "warning_objects"]

#: The code of each kind of resolution warning, by a phrase its sentence always holds (the first
#: match wins); a sentence none of them holds is ``resolution-warning``.
_KINDS: Final[Sequence[tuple[str, str]]] = (
    ("names the MCP server", "unknown-mcp-server"),
    ("its tools are not listed", "mcp-server-unavailable"),
    ("is not assignable to a subagent", "tool-not-assignable"),
    ("is not a builtin tool or a selector", "unknown-tool"),
    ("malformed selector", "malformed-selector"),
    ("argument patterns are not enforced", "rule-not-enforced"),
    ("inherit is ignored", "inherit-ignored"),
    ("'inherit' is ignored", "inherit-ignored"),
    ("isolated: true loads no extensions", "isolated-extensions"),
    ("still lets tools of loaded extensions through", "extension-tools-through"),
    ("max_depth", "depth-at-cap"),
    ("isolation: worktree", "worktree-unavailable"),
    ("is not inside a Git work tree", "worktree-unavailable"),
    ("is not a permission mode", "invalid-permission-mode"),
    ("the start will fail with unknown-model", "unknown-model"),
    ("no provider here serves it", "model-fallback"),
    ("the persona names", "persona-placeholder"),
    ("fallback_subagent", "dispatch-fallback"),
    ("names match case-insensitively", "dispatch-case"),
    ("extensions: ", "unknown-extension"),
    ("failed to load and offers no tools", "extension-failed"),
    ("skill: ", "skill-problem"),
    ("memory file", "memory-unreadable"),
    ("is a setting Membrane does not apply", "setting-ignored"),
    ("is about a tool Membrane does not have", "setting-ignored"),
    ("names no OpenCode tool", "setting-ignored"),
    ("Membrane cannot match", "setting-rule-stricter"),
    ("is not a rule; every", "setting-rule-stricter"),
    ("is not a rule; it is ignored", "setting-ignored"),
    ("nothing of the file is applied", "setting-file-unusable"),
    ("these hooks are left out", "setting-ignored"),
    ("hook is not run (Membrane runs", "setting-ignored"),
    ("Membrane asks about each tool", "setting-rule-stricter"),
    ("sets it too and wins", "setting-overridden"),
    ("is not used: ", "setting-model-unusable"),
    ("is bypassPermissions", "setting-bypass-permissions"),
)
#: Every code a resolution warning may carry.
RESOLUTION_WARNING_CODES: Final = tuple(
    sorted({code for _, code in _KINDS} | {"resolution-warning"})
)


def _written(text: str, file: str) -> JSONDict | None:
    """A resolution warning written as a ``DefinitionWarning`` of the definition's own file
    (``FILE:LINE: CODE: message``, as ``model-fallback`` is), read back into its parts."""
    if not text.startswith(f"{file}:"):
        return None
    found = _WRITTEN.match(text[len(file) + 1 :])
    if found is None:
        return None
    line = found["line"]
    return {
        "code": found["code"],
        "message": found["message"],
        "file": file,
        "line": None if line is None else int(line),
    }


_WRITTEN: Final = re.compile(
    r"(?:(?P<line>[0-9]+):)? (?P<code>[a-z][a-z0-9]*(?:-[a-z0-9]+)+): (?P<message>.*)\Z", re.S
)


def warning_objects(
    warnings: Iterable[str], definition_warnings: Iterable[DefinitionWarning], *, file: str
) -> list[JSONDict]:
    """``warnings`` as ``{code, message, file, line}`` objects, in order. ``definition_warnings``
    are the definition's own (matched by their text); ``file`` is the definition's path."""
    own = {str(w): w for w in definition_warnings}
    objects: list[JSONDict] = []
    for text in warnings:
        found = own.get(text)
        if found is not None:
            objects.append(
                {
                    "code": found.code,
                    "message": found.message,
                    "file": found.path,
                    "line": found.line,
                }
            )
            continue
        written = _written(text, file)
        if written is not None:
            objects.append(written)
            continue
        code = next((code for phrase, code in _KINDS if phrase in text), "resolution-warning")
        objects.append({"code": code, "message": text, "file": file, "line": None})
    return objects
