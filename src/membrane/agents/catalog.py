"""The catalog: every definition from every root, which one wins, and dispatch.

Roots, lowest to highest: the packaged builtins < other products' roots (``dialect_roots``:
Claude Code, OpenCode, Codex, GitHub Copilot, each read with its own dialect) <
``<home>/agents`` < ``<workspace>/.agents/agents`` (Membrane's fields, and pi's spellings) <
``<project>/.pi/agents`` (pi's dialect; seed 003's order) < ``<project>/.membrane/agents``,
each scanned recursively for ``*.md`` (``*.toml`` for Codex; an ``opencode.json`` root is one
file holding several definitions). The key is the definition's name. A higher root replaces
the whole definition (fields are never merged from the loser); within one root, two files with
the same name are decided by path order (the first wins) and warned about. A broken file lands
in ``errors`` and is skipped: whatever parsing one file raises, it becomes a
``DefinitionError`` for that path and never stops a reload.

``reload()`` runs before every spawn, so its unchanged path must cost O(roots), not O(files).
From the second reload on, where the platform has a directory watcher (Linux inotify, see
``membrane.agents.watch``), a reload asks the watcher once: nothing changed costs one look
with no wait, and k changed files cost k stats and reads (and a parse of each whose content
changed), plus the update of the names they define. An absent root is watched through its
nearest existing folder, for the entry that would lead to it appearing: while nothing appears
there it costs no stat either (a config file that exists is stat'ed at each reload). Without a
watcher (or when the watcher cannot say exactly what changed, or cannot watch a directory),
the stat walk decides: it stats every known directory and file and compares ``(mtime_ns,
ctime_ns, size, inode)``. A file or directory whose timestamp is too recent to be trusted (a
second write could land in the same clock tick and leave the stat unchanged, as git's "racy"
entries) is re-checked by content until it settles. Either way a file is parsed only when its
content changed. The roots are in ``membrane.agents.roots``; scanning one root is
``membrane.agents.scan``; the watch from the second reload on is ``CatalogWatch``, below.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from membrane.agents.builtins import BUILTIN_DIR, builtin_definitions, builtin_entries
from membrane.agents.cache import DefinitionCache
from membrane.agents.catalog_index import WinnerIndex
from membrane.agents.definition import REPAIRED_NAME, AgentDefinition, DefinitionWarning, Dispatch
from membrane.agents.dialect import WORKSPACE
from membrane.agents.roots import Root, claude_config_home, dialect_roots, pi_root
from membrane.agents.scan import ConfigScan, RootScan, Scan
from membrane.config.values import Settings
from membrane.errors import DefinitionError

if TYPE_CHECKING:  # inotify through ctypes: imported when a second reload arms the watch
    from membrane.agents.watch import DirectoryWatcher

__all__ = [
    "BUILTIN_DIR",
    "Catalog",
    "builtin_definitions",
]


def _refused_repairs(
    found: Mapping[str, tuple[int, AgentDefinition]],
) -> dict[str, tuple[int, DefinitionError]]:
    """Files of one name whose ``name`` was repaired to a slug, when another file (of any root,
    builtins aside) has that name too: which agent the name means would be a guess, so each
    repaired file is refused, naming the other path. A file replaces a builtin on purpose."""
    if len(found) < 2 or not any(
        w.code == REPAIRED_NAME for _, definition in found.values() for w in definition.warnings
    ):
        return {}
    files = sorted((path for path, (rank, _) in found.items() if rank > 0), key=_path_order)
    refused: dict[str, tuple[int, DefinitionError]] = {}
    if len(files) < 2:
        return refused
    for path in files:
        rank, definition = found[path]
        if not any(w.code == REPAIRED_NAME for w in definition.warnings):
            continue
        other = next(p for p in files if p != path)
        refused[path] = (
            rank,
            DefinitionError(
                f"`name` would be repaired to `{definition.name}`, which {other} also names; "
                f"{path} is refused so that the name is not a guess",
                path=path,
                line=definition.lines.get("name"),
                field="name",
                hint=f"give {path} a distinct, valid `name`",
                other=other,
            ),
        )
    return refused


def _path_order(path: str) -> tuple[str, ...]:
    return Path(path).parts


class Catalog:
    """All definitions, the winner for each name, and dispatch with the fallback policy.

    ``cache``, when given, is the file (in the project's state folder) that keeps parsed
    definitions by content digest across processes (``membrane.agents.cache``): a cold load
    parses only the files whose content it has not seen. It is written after the first load.
    """

    def __init__(
        self,
        *,
        project: Path | None,
        workspace: Path | None = None,
        home: Path | None = None,
        settings: Settings | None = None,
        cache: Path | None = None,
        claude_home: Path | None = None,
    ) -> None:
        if home is None:
            from membrane.config.load import membrane_home

            home = membrane_home()
        workspace = workspace if workspace is not None else project
        self.project = project
        if settings is None:
            from membrane.config.load import load_settings

            settings = load_settings(project=project, home=home)
        self.settings = settings
        candidates = [
            *dialect_roots(
                self.settings, project=project, claude_home=claude_home or claude_config_home()
            ),
            Root("global", home / "agents"),
        ]
        if workspace is not None:
            candidates.append(Root("workspace", workspace / ".agents" / "agents", WORKSPACE))
        pi = pi_root(self.settings, project=project)
        if pi is not None:
            candidates.append(pi)  # seed 003: .pi/agents wins over .agents/agents and global
        if project is not None:
            candidates.append(Root("project", project / ".membrane" / "agents"))
        # The same directory reached twice (say, the project is the home's parent) counts once,
        # at its highest position.
        seen: dict[Path, Root] = {}
        for root in candidates:
            place = _place(root.directory)
            seen.pop(place, None)
            seen[place] = root
        self.roots: tuple[Root, ...] = tuple(seen.values())
        self._cache = DefinitionCache(cache)
        self._scans: list[Scan] = [
            ConfigScan(root) if root.kind == "config" else RootScan(root, self._cache)
            for root in self.roots
        ]
        self._winners = WinnerIndex()
        self._shadowed: dict[str, list[AgentDefinition]] = {}
        #: Handed out by ``shadowed``; the dict is copied before it changes again.
        self._shadowed_view: Mapping[str, list[AgentDefinition]] | None = None
        #: The sorted ``errors`` and ``warnings``, ``None`` until read after a change.
        self._error_list: list[DefinitionError] | None = None
        self._warning_list: list[DefinitionWarning] | None = None
        # The index the winners are computed from, kept up to date file by file:
        # name -> {path: (root rank, definition)}, path -> the name its file defines.
        self._candidates: dict[str, dict[str, tuple[int, AgentDefinition]]] = {}
        self._names: dict[str, str] = {}
        self._errors: dict[str, tuple[int, DefinitionError]] = {}
        #: name -> the files refused because their repaired name collides with another file's.
        self._refused: dict[str, dict[str, tuple[int, DefinitionError]]] = {}
        self._duplicates: dict[str, list[tuple[tuple[int, tuple[str, ...]], DefinitionWarning]]]
        self._duplicates = {}
        #: ``None`` until the second reload arms it; ``False`` where no watcher can be had.
        self._watch: CatalogWatch | Literal[False] | None = None
        for path, _, definition in builtin_entries(self._cache):
            self._index(path, 0, definition)
        self._loaded = False
        self.reload()

    def reload(self) -> bool:
        """Bring the catalog up to date; True when anything changed. Never parses a file whose
        content did not change; costs O(roots) when nothing did (see the module docstring)."""
        if not self._loaded:
            self._loaded = True
            self._update({path for scan in self._scans for path in scan.rescan()}, force=True)
            kept = {path for path, _, _ in builtin_entries(self._cache)}
            self._cache.retain(kept.union(*(scan.files for scan in self._scans)))
            self._cache.save()
            return True
        watch = self._watch
        changed: set[str] | None = None
        if watch is None:
            # Arm now; this once the stat walk below still decides, for what changed before.
            self._watch = CatalogWatch.arm(self._scans) or False
        elif watch is not False:
            changed = watch.changed()
        if changed is None:
            changed = set()
            for scan in self._scans:
                if not scan.unchanged():
                    changed |= scan.rescan()
            if self._watch:
                self._watch.rewatch()
        if not changed:
            return False
        self._update(changed)
        return True

    def _update(self, paths: set[str], *, force: bool = False) -> None:
        """Re-index the files at ``paths`` and recompute the names they defined or define.

        The cost is in the number of paths and names touched, never in the catalog's size:
        each name's winner, shadowed list, duplicates and refusals change in place
        (``membrane.agents.catalog_index``); the sorted errors and warnings are rebuilt only
        when read after they changed."""
        files = {
            path: (rank, scan.files[path])
            for rank, scan in enumerate(self._scans, 1)
            for path in paths
            if path in scan.files
        }
        names: set[str] = set()
        for path in paths:
            old = self._names.pop(path, None)
            if old is not None:
                names.add(old)
                self._candidates[old].pop(path, None)
            if self._errors.pop(path, None) is not None:
                self._error_list = None
            if path not in files:
                continue
            rank, entry = files[path]
            result = entry.result
            if isinstance(result, DefinitionError):
                self._errors[path] = (rank, result)
                self._error_list = None
                continue
            names.add(result.name)
            self._index(path, rank, result)
        if force:
            # A full load ranks every name once (and the names of files that went away).
            winners: dict[str, AgentDefinition] = {}
            self._shadowed = {}
            for name in names | self._candidates.keys():
                ordered = self._ranked(name)
                if ordered:
                    winners[name] = ordered[0]
                    if len(ordered) > 1:
                        self._shadowed[name] = ordered[1:]
            self._winners.replace_all(winners)
            self._shadowed_view = None
            return
        for name in names:
            ordered = self._ranked(name)
            if not ordered:
                self._winners.remove(name)
            else:
                self._winners.set(name, ordered[0])
            if len(ordered) > 1 or name in self._shadowed:
                if self._shadowed_view is not None:
                    self._shadowed, self._shadowed_view = dict(self._shadowed), None
                if len(ordered) > 1:
                    self._shadowed[name] = ordered[1:]
                else:
                    del self._shadowed[name]

    @property
    def errors(self) -> list[DefinitionError]:
        """The files that could not be used, in root order and then path order."""
        if self._error_list is None:
            errors = dict(self._errors)
            for refused in self._refused.values():
                errors.update(refused)
            ordered = sorted(errors.items(), key=lambda item: (item[1][0], Path(item[0]).parts))
            self._error_list = [error for _, (_, error) in ordered]
        return self._error_list

    @property
    def warnings(self) -> list[DefinitionWarning]:
        """Duplicate names within one root, in root order and then path order."""
        if self._warning_list is None:
            self._warning_list = [
                warning
                for _, warning in sorted(
                    (item for found in self._duplicates.values() for item in found),
                    key=lambda item: item[0],
                )
            ]
        return self._warning_list

    @property
    def shadowed(self) -> Mapping[str, list[AgentDefinition]]:
        """Each name's losing definitions, highest first, for the names that have any."""
        if self._shadowed_view is None:
            self._shadowed_view = MappingProxyType(self._shadowed)
        return self._shadowed_view

    def _index(self, path: str, rank: int, definition: AgentDefinition) -> None:
        self._names[path] = definition.name
        self._candidates.setdefault(definition.name, {})[path] = (rank, definition)

    def _ranked(self, name: str) -> list[AgentDefinition]:
        """``name``'s definitions, winner first: a higher root wins; within a root the first
        file in path order wins and each other one is a duplicate (warned about)."""
        found = self._candidates.get(name)
        if self._duplicates.pop(name, None) is not None:
            self._warning_list = None
        if self._refused.pop(name, None) is not None:
            self._error_list = None
        if not found:
            self._candidates.pop(name, None)
            return []
        refused = _refused_repairs(found)
        if refused:
            self._refused[name] = refused
            self._error_list = None
            found = {path: entry for path, entry in found.items() if path not in refused}
        if len(found) == 1:  # the common case: one file defines the name
            return [definition for _, definition in found.values()]
        by_rank: dict[int, list[tuple[tuple[str, ...], AgentDefinition]]] = {}
        for path, (rank, definition) in found.items():
            by_rank.setdefault(rank, []).append((Path(path).parts, definition))
        ordered: list[AgentDefinition] = []
        warnings: list[tuple[tuple[int, tuple[str, ...]], DefinitionWarning]] = []
        for rank in sorted(by_rank, reverse=True):
            group = sorted(by_rank[rank], key=lambda item: item[0])
            first = group[0][1]
            ordered.append(first)
            for parts, result in group[1:]:
                ordered.append(result)
                warnings.append(
                    (
                        (rank, parts),
                        DefinitionWarning(
                            result.path,
                            result.lines.get("name"),
                            "duplicate-name",
                            f"`{result.name}` is also defined by {first.path}, which comes "
                            "first in path order and wins; this file is ignored",
                        ),
                    )
                )
        if warnings:
            self._duplicates[name] = warnings
            self._warning_list = None
        return ordered

    def get(self, name: str) -> AgentDefinition | None:
        """The winning definition named exactly ``name`` (enabled or not)."""
        return self._winners.get(name)

    def definitions(self) -> Mapping[str, AgentDefinition]:
        """The winners, by name, sorted: a snapshot later reloads leave as it is."""
        return self._winners.snapshot()

    def lookup(self, name: str) -> tuple[AgentDefinition | None, str]:
        """Exact name first, then a case-insensitive match when exactly one exists.

        Returns the definition (or ``None``) and, when ``None``, why: ``unknown`` or
        ``ambiguous (A, B)``.
        """
        # No name holds a ``/``: OpenCode's nested ``team/reviewer`` is ``team:reviewer`` here.
        name = name.replace("/", ":")
        exact = self._winners.get(name)
        if exact is not None:
            return exact, ""
        folded = name.casefold()
        matches = [d for key, d in self._winners.items() if key.casefold() == folded]
        if len(matches) == 1:
            return matches[0], ""
        if matches:
            return None, "is ambiguous (" + ", ".join(f"`{d.name}`" for d in matches) + ")"
        return None, "is unknown"

    def dispatch(self, agent_type: str, *, child: bool = True) -> Dispatch:
        """Resolve an agent type, following ``fallback_subagent`` when it is unknown, disabled
        or ambiguous. ``UnknownSubagent`` when the policy is ``none`` or the fallback is missing.

        ``child``: the agent is started by another agent (a ``Task`` call), so a definition with
        ``mode: primary`` (top level only) counts as unusable; ``False`` for a top-level start.
        """
        from membrane.agents.dispatch import dispatch  # a listing never dispatches

        return dispatch(self, agent_type, child=child)

    def require(self, name: str) -> AgentDefinition:
        """The usable definition ``name`` names for a top-level run (exact, else the one
        case-insensitive match), never a fallback: ``UnknownAgent`` with the closest names, and
        the file's own error when a file by that name exists but cannot be read."""
        from membrane.agents.dispatch import require

        return require(self, name)


def _place(directory: Path) -> Path:
    """Where ``directory`` really is, or where it is written when that cannot be told (a
    symlink loop, a parent that cannot be searched): such a root is reported by its scan."""
    try:
        return directory.resolve()
    except (OSError, RuntimeError):
        return directory.absolute()


# -- the watch, from the second reload on ---------------------------------------------------
# A directory watcher (``membrane.agents.watch``) on every root's known directories, each
# absent root watched through its nearest existing folder for the entry that would lead to it
# appearing, and what changed according to the watcher. ``Catalog.reload`` arms one at its
# second reload (the stat walk decides that once, and whenever the watch cannot say exactly
# what changed).


class CatalogWatch:
    """A watcher on the directories of ``scans`` (the catalog's, by root rank)."""

    def __init__(self, watcher: DirectoryWatcher, scans: Sequence[Scan]) -> None:
        self.watcher = watcher
        self._scans = scans
        #: Each absent root's nearest existing directory, watched for entries appearing (by
        #: index in ``_scans``); the scans with no directory that no such watch covers (a
        #: config file that exists, a root whose ancestor cannot be watched), checked with
        #: a stat each reload; and the covered ones not yet checked since their watch began.
        self._ancestors: dict[int, str] = {}
        self._stat_each: tuple[Scan, ...] = ()
        self._unverified: set[int] = set()

    @classmethod
    def arm(cls, scans: Sequence[Scan]) -> CatalogWatch | None:
        """A watch on every known directory, or ``None`` (the stat walk decides then). The
        stat walk that follows arming covers what changed before the watches existed."""
        from membrane.agents.watch import DirectoryWatcher

        watcher = DirectoryWatcher.create()
        if watcher is None:
            return None
        watch = cls(watcher, scans)
        if not watch.rewatch():
            watcher.close()
            return None
        return watch

    def rewatch(self) -> bool:
        """Watch the scans' directories as they are now; ``False`` when one cannot be watched."""
        watcher = self.watcher
        wanted = {directory for scan in self._scans for directory in scan.dirs}
        ancestors = self._absent_ancestors()
        for directory in watcher.directories - wanted - set(ancestors.values()):
            watcher.discard(directory)
        if not all(watcher.add(directory) for directory in wanted):
            return False
        self._watch_absent(ancestors)
        return True

    def _absent_ancestors(self) -> dict[int, str]:
        return {
            i: found
            for i, scan in enumerate(self._scans)
            if not scan.dirs and (found := _appear_ancestor(str(scan.root.directory)))
        }

    def _watch_absent(self, ancestors: dict[int, str] | None = None) -> None:
        """Watch each absent root's nearest existing directory for entries appearing, so an
        unchanged reload needs no stat of an absent root. A root whose watch is new is checked
        once more at the next reload (what appeared before the watch began); one whose
        ancestor cannot be watched is stat'ed every reload, as a config file that exists is."""
        watcher = self.watcher
        if ancestors is None:
            ancestors = self._absent_ancestors()
        covered: dict[int, str] = {}
        for i, directory in ancestors.items():
            known = directory in watcher
            if watcher.add(directory, appear=True):
                covered[i] = directory
                if not known:
                    self._unverified.add(i)
        for directory in set(self._ancestors.values()) - set(covered.values()):
            if directory in watcher and not any(directory in scan.dirs for scan in self._scans):
                watcher.discard(directory)
        self._ancestors = covered
        self._stat_each = tuple(
            scan for i, scan in enumerate(self._scans) if not scan.dirs and i not in covered
        )

    def changed(self) -> set[str] | None:
        """What changed according to the watcher; ``None`` when the stat walk must decide."""
        watcher = self.watcher
        changes = watcher.changes()
        if changes is None:
            return None
        changed: set[str] = set()
        if not changes and not self._unverified:
            # Nothing appeared under any watched directory: only the scans no watch covers.
            for scan in self._stat_each:
                if not scan.unchanged():
                    changed |= scan.rescan()
                    if not self.rewatch():
                        return None
            return changed
        if changes:
            # Something appeared somewhere: move the absent roots' watches first (a folder on
            # the way to one may be new), then look at each absent root once more.
            self._watch_absent()
        unverified, self._unverified = self._unverified, set()
        for i, scan in enumerate(self._scans):
            if not scan.dirs:
                # An absent root (or a config file): one stat says whether it appeared.
                if (changes or i in unverified or i not in self._ancestors) and (
                    not scan.unchanged()
                ):
                    changed |= scan.rescan()
                    if not self.rewatch():
                        return None
                continue
            top = str(scan.root.directory)
            mine = [c for c in changes if c.path.startswith(top + os.sep)]
            if mine:
                found = scan.apply(mine, watcher)
                if found is None:
                    return None
                changed |= found
        return changed


def _appear_ancestor(path: str) -> str | None:
    """The nearest existing directory above ``path`` when ``path`` does not exist: what to
    watch for the entry that would lead to it. ``None`` when ``path`` exists (in any form), or
    the nearest thing that exists is not a plain directory (a file, a symlink) or cannot be
    looked at (no permission): then a stat decides at every reload."""
    current = path
    while True:
        try:
            found = os.lstat(current)
        except FileNotFoundError:
            parent = os.path.dirname(current)
            if parent == current:
                return None
            current = parent
            continue
        except OSError:
            return None
        if current == path or not stat.S_ISDIR(found.st_mode):
            return None
        return current
