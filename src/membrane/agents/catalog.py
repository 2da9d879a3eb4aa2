"""The catalog: every definition from every root, which one wins, and dispatch.

Roots, lowest to highest: the packaged builtins < other products' roots (``dialect_roots``:
Claude Code, OpenCode, pi, each read with its own dialect) < ``<home>/agents`` <
``<workspace>/.agents/agents`` < ``<project>/.membrane/agents``, each scanned recursively for
``*.md`` (an ``opencode.json`` root is one file holding several definitions). The key is the
definition's name. A higher root replaces the whole definition (fields are never merged from
the loser); within one root, two files with the same name are decided by path order (the first
wins) and warned about. A broken file lands in ``errors`` and is skipped: whatever parsing one
file raises, it becomes a ``DefinitionError`` for that path and never stops a reload.

``reload()`` runs before every spawn, so its unchanged path must cost O(roots), not O(files).
From the second reload on, where the platform has a directory watcher (Linux inotify, see
``membrane.agents.watch``), a reload reads the watcher once: nothing changed costs one
non-blocking read, and k changed files cost k stats and reads (and a parse of each whose content
changed), plus the update of the names they define. Without a watcher (or when the watcher
cannot say exactly what changed, or cannot watch a directory), the stat walk decides: it stats
every known directory and file and compares ``(mtime_ns, ctime_ns, size, inode)``. A file or
directory whose timestamp is too recent to be trusted (a second write could land in the same
clock tick and leave the stat unchanged, as git's "racy" entries) is re-checked by content
until it settles. Either way a file is parsed only when its content changed.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from membrane.agents.builtins import (
    BUILTIN_DIR,
    builtin_definitions,
    builtin_entries,
    decode_definition,
)
from membrane.agents.cache import DefinitionCache
from membrane.agents.definition import AgentDefinition, DefinitionWarning
from membrane.agents.files import read_file_bytes
from membrane.agents.opencode_config import OPENCODE_CONFIG_NAMES, read_opencode_config
from membrane.agents.translation import MEMBRANE, Dialect
from membrane.agents.values import REPAIRED_NAME
from membrane.agents.watch import Change, DirectoryWatcher
from membrane.config.values import Settings
from membrane.errors import DefinitionError, UnknownAgent, UnknownSubagent

__all__ = [
    "BUILTIN_DIR",
    "Catalog",
    "Dispatch",
    "Root",
    "builtin_definitions",
    "claude_config_home",
    "dialect_roots",
]

DEFAULT_FALLBACK = "general-purpose"
#: A timestamp this close to "now" may share a clock tick with a later write.
_RACY_NS = 100_000_000


@dataclass(frozen=True, slots=True)
class Root:
    """One place definitions come from. ``label`` is ``global``, ``workspace`` or ``project``
    for Membrane's own roots, else the dialect's root (``claude-code-project`` ...). A ``config``
    root is one file holding several definitions (``opencode.json``), not a directory."""

    label: str
    directory: Path
    dialect: Dialect = MEMBRANE
    kind: Literal["dir", "config"] = "dir"

    @property
    def cache_key(self) -> str:
        """What the parse of a file here depends on besides its content."""
        if self.dialect is MEMBRANE or self.dialect == MEMBRANE:
            return self.label
        d = self.dialect
        return f"{self.label}|{d.name}|{d.omitted_tools}|{','.join(d.default_tools)}"


def claude_config_home() -> Path:
    """Claude Code's folder: ``$CLAUDE_CONFIG_DIR`` when set, else ``~/.claude``."""
    value = os.environ.get("CLAUDE_CONFIG_DIR", "").strip()
    return Path(value).expanduser() if value else Path.home() / ".claude"


def dialect_roots(settings: Settings, *, project: Path | None, claude_home: Path) -> list[Root]:
    """Other products' roots, lowest first; each one below all of Membrane's own roots.

    ``~/.claude/agents`` < ``opencode.jsonc`` < ``opencode.json`` < ``.opencode/agent`` <
    ``.opencode/agents`` < ``.claude/agents`` < ``.pi/agents``; a setting turns each product off.
    """
    claude = Dialect("claude-code", settings.claude_code_omitted_tools, settings.default_tools)
    opencode = Dialect("opencode", settings.opencode_omitted_tools, settings.default_tools)
    pi = Dialect("pi", settings.pi_omitted_tools, settings.default_tools)
    roots: list[Root] = []
    if settings.claude_code_agents:
        roots.append(Root("claude-code-global", claude_home / "agents", claude))
    if project is None:
        return roots
    if settings.opencode_agents:
        roots += [
            Root("opencode-project", project / name, opencode, "config")
            for name in reversed(OPENCODE_CONFIG_NAMES)
        ]
        roots += [
            Root("opencode-project", project / ".opencode" / name, opencode)
            for name in ("agent", "agents")
        ]
    if settings.claude_code_agents:
        roots.append(Root("claude-code-project", project / ".claude" / "agents", claude))
    if settings.pi_agents:
        roots.append(Root("pi-project", project / ".pi" / "agents", pi))
    return roots


@dataclass(frozen=True, slots=True)
class Dispatch:
    """The answer to an agent type: the definition to run and, when it is not an exact hit, why."""

    definition: AgentDefinition
    requested: str
    note: str | None = None
    #: True when the fallback policy chose ``definition``.
    fallback: bool = False


Signature = tuple[int, int, int, int]


def _signature(stat: os.stat_result) -> Signature:
    return (stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino)


@dataclass(slots=True)
class _Entry:
    signature: Signature
    digest: bytes
    result: AgentDefinition | DefinitionError


def _racy(signature: Signature, now: int) -> bool:
    return now - max(signature[0], signature[1]) < _RACY_NS


class _RootScan:
    """The directories and files of one root as last seen."""

    def __init__(self, root: Root, cache: DefinitionCache) -> None:
        self.root = root
        self.cache = cache
        #: directory -> (its signature, the names in it that matter)
        self.dirs: dict[str, tuple[Signature, frozenset[str]]] = {}
        self.files: dict[str, _Entry] = {}
        #: Paths whose stat cannot be trusted yet; checked by listing or content instead.
        self.racy: set[str] = set()

    def unchanged(self) -> bool:
        """The stat-only check (plus content for racy paths). Never parses."""
        if not self.dirs:
            return not os.path.isdir(self.root.directory)
        try:
            for path, (sig, names) in self.dirs.items():
                if _signature(os.stat(path)) != sig:
                    return False
                if path in self.racy and _listing(path) != names:
                    return False
            for path, entry in self.files.items():
                if _file_signature(path) != entry.signature:
                    return False
                if path in self.racy and _digest(read_file_bytes(path)) != entry.digest:
                    return False
        except OSError:
            return False
        if self.racy:
            now = time.time_ns()
            self.racy = {
                path
                for path in self.racy
                if _racy(
                    self.dirs[path][0] if path in self.dirs else self.files[path].signature, now
                )
            }
        return True

    def rescan(self) -> set[str]:
        """List the tree again; parse only files that are new or whose content changed.
        Returns the paths whose entry is new, gone or different."""
        old = self.files
        self.dirs, self.files, self.racy = self._walk(str(self.root.directory))
        return {
            path
            for path in old.keys() | self.files.keys()
            if old.get(path) is not self.files.get(path)
        }

    def apply(self, changes: list[Change], watcher: DirectoryWatcher) -> set[str] | None:
        """Bring the scan up to date with what ``watcher`` saw under this root: each changed
        file is stat'ed and read again (parsed when its content changed); a new directory is
        walked and watched; a directory that went away drops what was below it. Returns the
        paths whose entry changed, or ``None`` when a directory could not be watched."""
        changed: set[str] = set()
        for change in changes:
            path = change.path
            name = os.path.basename(path)
            if change.is_dir:
                if name.startswith("."):
                    continue
                prefix = path + os.sep
                gone = [p for p in self.files if p.startswith(prefix)]
                for sub in [d for d in self.dirs if d == path or d.startswith(prefix)]:
                    del self.dirs[sub]
                    watcher.discard(sub)
                for file in gone:
                    del self.files[file]
                changed.update(gone)
                if os.path.isdir(path) and not os.path.islink(path):
                    dirs, files, racy = self._walk(path)
                    for directory in dirs:
                        if not watcher.add(directory):
                            return None
                    self.dirs.update(dirs)
                    self.files.update(files)
                    self.racy |= racy
                    changed.update(files)
                continue
            if not name.endswith(".md"):
                continue
            entry = None if os.path.isdir(path) else self._entry(path)
            old = self.files.get(path)
            if entry is None:
                if old is not None:
                    del self.files[path]
                    changed.add(path)
            elif entry is not old:
                self.files[path] = entry
                self.racy.discard(path)
                changed.add(path)
        return changed

    def _walk(
        self, top: str
    ) -> tuple[dict[str, tuple[Signature, frozenset[str]]], dict[str, _Entry], set[str]]:
        dirs: dict[str, tuple[Signature, frozenset[str]]] = {}
        files: dict[str, _Entry] = {}
        racy: set[str] = set()
        now = time.time_ns()
        stack = [top]
        while stack:
            current = stack.pop()
            try:
                sig = _signature(os.stat(current))
                entries = [item for item in os.scandir(current) if _relevant(item)]
            except OSError:
                continue
            dirs[current] = (sig, frozenset(item.name for item in entries))
            if _racy(sig, now):
                racy.add(current)
            for item in entries:
                if item.is_dir(follow_symlinks=False):
                    stack.append(item.path)
                    continue
                entry = self._entry(item.path)
                if entry is not None:
                    files[item.path] = entry
                    if _racy(entry.signature, now):
                        racy.add(item.path)
        return dirs, files, racy

    def _entry(self, path: str) -> _Entry | None:
        try:
            signature = _signature(os.stat(path))
            old = self.files.get(path)
            if old is not None and old.signature == signature and path not in self.racy:
                return old
            data = read_file_bytes(path)
        except OSError as exc:
            return _unreadable(path, exc)
        digest = _digest(data)
        if old is not None and old.digest == digest:
            return _Entry(signature, digest, old.result)
        label = self.root.label
        cached = self.cache.get(path, root=self.root.cache_key, digest=digest)
        if cached is not None:
            return _Entry(signature, digest, cached)
        try:
            result: AgentDefinition | DefinitionError = decode_definition(
                data, path=path, root=label, dialect=self.root.dialect
            )
        except DefinitionError as exc:
            result = exc
        except Exception as exc:  # one file never takes the catalog down
            result = DefinitionError(
                f"cannot be read: {type(exc).__name__}: {exc}",
                path=path,
                line=1,
                hint="fix or remove this file; the other definitions are unaffected",
            )
            result.__cause__ = exc
        if isinstance(result, AgentDefinition):
            self.cache.put(path, root=self.root.cache_key, digest=digest, definition=result)
        return _Entry(signature, digest, result)


class _ConfigScan:
    """A config file holding several definitions (``opencode.json``), as last seen. Its
    entries are keyed ``<file>#<name>``; it has no directories, so the catalog checks it with
    one stat per reload."""

    def __init__(self, root: Root) -> None:
        self.root = root
        self.dirs: dict[str, tuple[Signature, frozenset[str]]] = {}
        self.files: dict[str, _Entry] = {}
        self.racy: set[str] = set()
        self._signature: Signature | None = None
        self._digest: bytes | None = None
        self._racy = False

    def unchanged(self) -> bool:
        path = str(self.root.directory)
        try:
            signature: Signature | None = _signature(os.stat(path))
        except OSError:
            signature = None
        if signature != self._signature:
            return False
        if self._racy and signature is not None:
            try:
                if _digest(read_file_bytes(path)) != self._digest:
                    return False
            except OSError:
                return False
            self._racy = _racy(signature, time.time_ns())
        return True

    def rescan(self) -> set[str]:
        path = str(self.root.directory)
        old = self.files
        try:
            signature = _signature(os.stat(path))
            data = read_file_bytes(path)
        except OSError:
            self._signature, self._digest, self.files = None, None, {}
            return set(old)
        digest = _digest(data)
        if digest != self._digest:
            files = {}
            for result in read_opencode_config(
                data, path=path, root=self.root.label, dialect=self.root.dialect
            ):
                key = result.path if isinstance(result, AgentDefinition) else result.data["path"]
                files[str(key)] = _Entry(signature, digest, result)
            self.files = files
        self._signature, self._digest = signature, digest
        self._racy = _racy(signature, time.time_ns())
        return {p for p in old.keys() | self.files.keys() if old.get(p) is not self.files.get(p)}

    def apply(self, changes: list[Change], watcher: DirectoryWatcher) -> set[str] | None:
        return None  # never called: a config root has no directories to watch


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


def _names_file(error: DefinitionError, name: str) -> bool:
    """Whether the unusable file of ``error`` is the one a run of ``name`` meant: its file
    name (or its ``opencode.json`` entry) is ``name``, in any case."""
    path = str(error.data.get("path", ""))
    stem = path.rpartition("#")[2] if "#" in path else Path(path).stem
    return stem.casefold() == name.casefold()


def _path_order(path: str) -> tuple[str, ...]:
    return Path(path).parts


def _relevant(item: os.DirEntry[str]) -> bool:
    """``*.md`` entries that are not directories and the directories below (hidden ones, such
    as ``.git``, are skipped). A ``*.md`` symlink loop, dangling link or FIFO is relevant: it is
    reported as an unusable file, and never hides its neighbours."""
    if item.is_dir(follow_symlinks=False):
        return not item.name.startswith(".")
    if not item.name.endswith(".md"):
        return False
    try:
        return not item.is_dir()
    except OSError:
        return True


def _file_signature(path: str) -> Signature:
    """The signature of what ``path`` names, or of the link itself when it leads nowhere."""
    try:
        return _signature(os.stat(path))
    except OSError:
        return _signature(os.lstat(path))


def _unreadable(path: str, exc: OSError) -> _Entry | None:
    """The entry of a ``*.md`` that cannot be read: ``None`` when nothing is there any more
    (gone between the listing and the read; the next reload settles it), else an error that
    names why (a symlink loop, a dangling link, a FIFO, no permission)."""
    try:
        signature = _signature(os.lstat(path))
    except OSError:
        return None
    error = DefinitionError(
        f"cannot be read: {exc.strerror or exc}",
        path=path,
        line=1,
        hint="make it a readable regular file (or a link to one), or remove it; "
        "the other definitions are unaffected",
    )
    return _Entry(signature, b"", error)


def _listing(path: str) -> frozenset[str]:
    return frozenset(item.name for item in os.scandir(path) if _relevant(item))


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


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
            candidates.append(Root("workspace", workspace / ".agents" / "agents"))
        if project is not None:
            candidates.append(Root("project", project / ".membrane" / "agents"))
        # The same directory reached twice (say, the project is the home's parent) counts once,
        # at its highest position.
        seen: dict[Path, Root] = {}
        for root in candidates:
            seen.pop(root.directory.resolve(), None)
            seen[root.directory.resolve()] = root
        self.roots: tuple[Root, ...] = tuple(seen.values())
        self._cache = DefinitionCache(cache)
        self._scans: list[_RootScan | _ConfigScan] = [
            _ConfigScan(root) if root.kind == "config" else _RootScan(root, self._cache)
            for root in self.roots
        ]
        self.errors: list[DefinitionError] = []
        self.warnings: list[DefinitionWarning] = []
        self.shadowed: Mapping[str, list[AgentDefinition]] = MappingProxyType({})
        self._winners: Mapping[str, AgentDefinition] = MappingProxyType({})
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
        self._watcher: DirectoryWatcher | bool | None = None
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
        watcher = self._watcher
        changed: set[str] | None = None
        if watcher is None:
            # Arm now; this once the stat walk below still decides, for what changed before.
            self._watcher = self._arm()
        elif isinstance(watcher, DirectoryWatcher):
            changed = self._watched(watcher)
        if changed is None:
            changed = set()
            for scan in self._scans:
                if not scan.unchanged():
                    changed |= scan.rescan()
            if isinstance(self._watcher, DirectoryWatcher):
                self._rewatch(self._watcher)
        if not changed:
            return False
        self._update(changed)
        return True

    def _arm(self) -> DirectoryWatcher | bool:
        """A watcher on every known directory, or ``False`` (the stat walk decides then). The
        stat walk that follows arming covers what changed before the watches existed."""
        watcher = DirectoryWatcher.create()
        if watcher is None:
            return False
        if not self._rewatch(watcher):
            watcher.close()
            return False
        return watcher

    def _rewatch(self, watcher: DirectoryWatcher) -> bool:
        wanted = {directory for scan in self._scans for directory in scan.dirs}
        for directory in watcher.directories - wanted:
            watcher.discard(directory)
        return all(watcher.add(directory) for directory in wanted)

    def _watched(self, watcher: DirectoryWatcher) -> set[str] | None:
        """What changed according to ``watcher``; ``None`` when the stat walk must decide."""
        changes = watcher.changes()
        if changes is None:
            return None
        changed: set[str] = set()
        for scan in self._scans:
            if not scan.dirs:
                # An absent root: one stat says whether it appeared.
                if not scan.unchanged():
                    changed |= scan.rescan()
                    if not self._rewatch(watcher):
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

    def _update(self, paths: set[str], *, force: bool = False) -> None:
        """Re-index the files at ``paths`` and recompute the names they defined or define."""
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
            self._errors.pop(path, None)
            if path not in files:
                continue
            rank, entry = files[path]
            result = entry.result
            if isinstance(result, DefinitionError):
                self._errors[path] = (rank, result)
                continue
            names.add(result.name)
            self._index(path, rank, result)
        if not names and not force:
            self.errors = self._sorted_errors()
            return
        winners, shadowed = dict(self._winners), dict(self.shadowed)
        resort = force
        # A forced update ranks every name once (and the names of files that went away).
        for name in names | self._candidates.keys() if force else names:
            ordered = self._ranked(name)
            if not ordered:
                winners.pop(name, None)
                shadowed.pop(name, None)
                resort = True
                continue
            if name not in winners:
                resort = True
            winners[name] = ordered[0]
            if len(ordered) > 1:
                shadowed[name] = ordered[1:]
            else:
                shadowed.pop(name, None)
        # A new or removed name re-sorts the winners (one C-level sort); a changed one keeps
        # its place.
        self._winners = MappingProxyType(dict(sorted(winners.items())) if resort else winners)
        self.shadowed = MappingProxyType(shadowed)
        self.errors = self._sorted_errors()
        self.warnings = [
            warning
            for _, warning in sorted(
                (item for found in self._duplicates.values() for item in found),
                key=lambda item: item[0],
            )
        ]

    def _index(self, path: str, rank: int, definition: AgentDefinition) -> None:
        self._names[path] = definition.name
        self._candidates.setdefault(definition.name, {})[path] = (rank, definition)

    def _sorted_errors(self) -> list[DefinitionError]:
        errors = dict(self._errors)
        for refused in self._refused.values():
            errors.update(refused)
        ordered = sorted(errors.items(), key=lambda item: (item[1][0], Path(item[0]).parts))
        return [error for _, (_, error) in ordered]

    def _ranked(self, name: str) -> list[AgentDefinition]:
        """``name``'s definitions, winner first: a higher root wins; within a root the first
        file in path order wins and each other one is a duplicate (warned about)."""
        found = self._candidates.get(name)
        self._duplicates.pop(name, None)
        self._refused.pop(name, None)
        if not found:
            self._candidates.pop(name, None)
            return []
        refused = _refused_repairs(found)
        if refused:
            self._refused[name] = refused
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
        return ordered

    def get(self, name: str) -> AgentDefinition | None:
        """The winning definition named exactly ``name`` (enabled or not)."""
        return self._winners.get(name)

    def definitions(self) -> Mapping[str, AgentDefinition]:
        """The winners, by name, sorted."""
        return self._winners

    def lookup(self, name: str) -> tuple[AgentDefinition | None, str]:
        """Exact name first, then a case-insensitive match when exactly one exists.

        Returns the definition (or ``None``) and, when ``None``, why: ``unknown`` or
        ``ambiguous (A, B)``.
        """
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
        found, why = self.lookup(agent_type)
        if found is not None and child and found.mode == "primary":
            why = f"is a primary agent (mode: primary in {found.path}), run only at the top level"
        elif found is not None and found.is_enabled:
            note = None
            if found.name != agent_type:
                note = f"`{agent_type}` matched `{found.name}` (names match case-insensitively)"
            return Dispatch(found, agent_type, note)
        elif found is not None:
            why = f"is disabled ({found.path})"
        policy = self.settings.fallback_subagent
        if policy is not None and policy.strip().lower() == "none":
            raise self._unknown(agent_type, why, "fallback_subagent is `none`, which fails closed")
        target = policy if policy is not None else DEFAULT_FALLBACK
        fallback, fallback_why = self.lookup(target)
        if fallback is not None and child and fallback.mode == "primary":
            fallback, fallback_why = None, "is a primary agent (mode: primary)"
        if fallback is None or not fallback.is_enabled:
            fallback_why = fallback_why or "is disabled"
            raise self._unknown(agent_type, why, f"the fallback `{target}` {fallback_why}")
        if policy is None:
            note = (
                f"agent type `{agent_type}` {why}; using `{fallback.name}`, the default fallback "
                '(set fallback_subagent = "none" to fail instead)'
            )
        else:
            note = f"agent type `{agent_type}` {why}; using `{fallback.name}` (fallback_subagent)"
        return Dispatch(fallback, agent_type, note, fallback=True)

    def require(self, name: str) -> AgentDefinition:
        """The usable definition ``name`` names for a top-level run (exact, else the one
        case-insensitive match), never a fallback: ``UnknownAgent`` with the closest names, and
        the file's own error when a file by that name exists but cannot be read."""
        found, why = self.lookup(name)
        if found is not None and found.is_enabled:
            return found
        if found is not None:
            why = f"is disabled (enabled: false in {found.path})"
        broken = next((e for e in self.errors if _names_file(e, name)), None)
        if broken is not None:
            why = f"is defined by {broken.data['path']}, which cannot be used: {broken}"
        known = sorted(n for n, d in self._winners.items() if d.is_enabled)
        closest = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = (
            f"did you mean {', '.join(f'`{c}`' for c in closest)}?"
            if closest
            else "`membrane agents list` shows the agents"
        )
        raise UnknownAgent(
            f"agent `{name}` {why}; {hint}",
            requested=name,
            reason=why,
            closest=closest,
            file_error=None if broken is None else broken.to_dict(),
        )

    def _unknown(self, agent_type: str, why: str, policy: str) -> UnknownSubagent:
        known = sorted(name for name, d in self._winners.items() if d.is_enabled)
        close = difflib.get_close_matches(agent_type, known, n=1)
        hint = f"did you mean `{close[0]}`?" if close else "known: " + ", ".join(known)
        return UnknownSubagent(
            f"agent type `{agent_type}` {why}, and {policy}; {hint}",
            requested=agent_type,
            reason=why,
            known=known,
            suggestion=close[0] if close else None,
        )
