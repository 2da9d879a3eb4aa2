"""Control paths: the places inside a checkout that no child tool may write.

Membrane reads its definitions, settings, extensions and skills from catalog roots that may lie
inside a checkout, and git runs hooks and reads configuration from ``.git``. A child that could
write there could plant a definition (``.agents/agents/general-purpose.md`` with ``tools: '*'``)
that the parent's next child would get, or a hook that the host's next ``git commit`` would run.
So these are control paths (DESIGN rule 9):

* anything under a ``.git`` entry, at any depth (a worktree's ``.git`` file, a nested
  repository's folder);
* anything under the catalog roots at the checkout's top: ``.membrane``, ``.agents`` and the
  dialect roots ``.claude``, ``.opencode``, ``.pi`` and ``.codex`` (skills), and OpenCode's
  ``opencode.json`` (``opencode.jsonc``), which holds agent definitions.

The one exception is the calling agent's own memory folder, ``.membrane/memory/<agent>/`` and
``.membrane/memory.local/<agent>/``, and for a Claude Code agent's memory Claude Code's own
``.claude/agent-memory/<agent>/`` and ``.claude/agent-memory-local/<agent>/`` (only those: never
``.claude/settings.json``, ``.claude/agents`` or ``.claude/hooks``). Names are compared
case-insensitively (for case-insensitive file systems) and after symlinks are resolved.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "CATALOG_FILES",
    "CATALOG_ROOTS",
    "GIT_ENTRY",
    "MEMORY_FOLDERS",
    "MEMORY_PLACES",
    "protected_message",
    "protected_part",
    "real_path",
]

#: The catalog roots at a checkout's top that are control paths.
CATALOG_ROOTS: tuple[str, ...] = (
    ".membrane",
    ".agents",
    ".claude",
    ".opencode",
    ".pi",
    ".codex",
    # OpenCode's config file holds agent definitions too.
    "opencode.json",
    "opencode.jsonc",
)
#: The catalog roots that are single files, not folders.
CATALOG_FILES: frozenset[str] = frozenset(
    name for name in CATALOG_ROOTS if name.endswith((".json", ".jsonc"))
)
#: A repository's metadata, protected at any depth.
GIT_ENTRY = ".git"
#: Folders under ``.membrane`` whose ``<agent>/`` subfolder that agent may write.
MEMORY_FOLDERS: tuple[str, ...] = ("memory", "memory.local")
#: Every (catalog root, folder) whose ``<agent>/`` subfolder that agent may write: Membrane's
#: memory folders and Claude Code's agent memory.
MEMORY_PLACES: tuple[tuple[str, str], ...] = (
    *((".membrane", folder) for folder in MEMORY_FOLDERS),
    (".claude", "agent-memory"),
    (".claude", "agent-memory-local"),
)

_ROOTS_FOLDED = {name.casefold(): name for name in CATALOG_ROOTS}


def real_path(path: Path) -> Path:
    """``path`` with every symlink and ``..`` resolved; never raises (a loop stays as is).

    A link swapped while it is read (``lstat`` saw a link, ``readlink`` no longer does) makes
    ``realpath`` fail; it is asked again, and after that the lexical path is returned: writes
    never rely on this answer alone, they walk the path again without following links.
    """
    for _ in range(3):
        try:
            return Path(os.path.realpath(path))
        except OSError:
            continue
    return Path(os.path.normpath(os.path.abspath(path)))


def protected_part(real: Path, root: Path, *, agent: str | None) -> str | None:
    """The control path (``.git``, ``.membrane``, ``.agents``, ...) that the real path ``real``
    lies in, or ``None`` when a child tool may write it.

    ``real`` must be inside ``root`` (both real). ``agent`` may write its own memory folder.
    """
    parts = real.relative_to(root).parts
    folded = [part.casefold() for part in parts]
    if GIT_ENTRY in folded:
        return GIT_ENTRY
    top = _ROOTS_FOLDED.get(folded[0]) if folded else None
    if top is None:
        return None
    if agent and len(parts) >= 3 and (top, folded[1]) in MEMORY_PLACES and parts[2] == agent:
        return None
    return top


def protected_message(protected: str, agent: str | None) -> str:
    """Why a write into the control path ``protected`` is refused, and what is allowed."""
    if protected == GIT_ENTRY:
        return (
            "it is inside .git, the repository's own metadata (config, hooks, objects), which "
            "child tools must not change."
        )
    if protected == ".membrane":
        own = (
            f" Your own memory folders, .membrane/memory/{agent}/ and "
            f".membrane/memory.local/{agent}/, may be written."
            if agent
            else ""
        )
        return (
            "it is inside .membrane, Membrane's own configuration (agent definitions, "
            f"extensions, settings, other agents' memory and worktrees), which agents must not "
            f"change.{own}"
        )
    own = (
        f" Your own memory folders, .claude/agent-memory/{agent}/ and "
        f".claude/agent-memory-local/{agent}/, may be written."
        if agent and protected == ".claude"
        else ""
    )
    return (
        f"it is inside {protected}, a folder agent definitions and skills are loaded from, "
        f"which agents must not change.{own}"
    )
