"""The catalog: every definition from every root, which one wins, and dispatch.

Roots, lowest to highest: the packaged builtins < ``<home>/agents`` < ``<workspace>/.agents/agents``
< ``<project>/.membrane/agents``, each scanned recursively for ``*.md``. The key is the
definition's name. A higher root replaces the whole definition (fields are never merged from
the loser); within one root, two files with the same name are decided by path order (the first
wins) and warned about. A broken file lands in ``errors`` and is skipped: whatever parsing one
file raises, it becomes a ``DefinitionError`` for that path and never stops a reload.

``reload()`` runs before every spawn, so its unchanged path must be cheap: it stats every known
directory and file and compares ``(mtime_ns, ctime_ns, size, inode)``. A file or directory whose
timestamp is too recent to be trusted (a second write could land in the same clock tick and
leave the stat unchanged, as git's "racy" entries) is re-checked by content until it settles.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType

from membrane.agents.definition import AgentDefinition, DefinitionWarning
from membrane.agents.frontmatter import MAX_BYTES, decode_definition, parse_definition
from membrane.config.load import load_settings, membrane_home
from membrane.config.values import Settings
from membrane.errors import DefinitionError, UnknownSubagent

__all__ = ["BUILTIN_DIR", "Catalog", "Dispatch", "Root", "builtin_definitions"]

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "builtin_agents"
DEFAULT_FALLBACK = "general-purpose"
#: A timestamp this close to "now" may share a clock tick with a later write.
_RACY_NS = 100_000_000


@dataclass(frozen=True, slots=True)
class Root:
    """One place definitions come from. ``label`` is ``global``, ``workspace`` or ``project``."""

    label: str
    directory: Path


@dataclass(frozen=True, slots=True)
class Dispatch:
    """The answer to an agent type: the definition to run and, when it is not an exact hit, why."""

    definition: AgentDefinition
    requested: str
    note: str | None = None
    #: True when the fallback policy chose ``definition``.
    fallback: bool = False


@cache
def builtin_definitions() -> tuple[AgentDefinition, ...]:
    """The packaged builtins, parsed once per process."""
    found = []
    for file in sorted(BUILTIN_DIR.glob("*.md")):
        text = file.read_text(encoding="utf-8")
        found.append(parse_definition(text, path=f"<builtin>/{file.name}", root="builtin"))
    return tuple(found)


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

    def __init__(self, root: Root) -> None:
        self.root = root
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
                if _signature(os.stat(path)) != entry.signature:
                    return False
                if path in self.racy and _digest(_read(path)) != entry.digest:
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

    def rescan(self) -> None:
        """List the tree again; parse only files that are new or whose content changed."""
        dirs: dict[str, tuple[Signature, frozenset[str]]] = {}
        files: dict[str, _Entry] = {}
        racy: set[str] = set()
        now = time.time_ns()
        stack = [str(self.root.directory)]
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
        self.dirs, self.files, self.racy = dirs, files, racy

    def _entry(self, path: str) -> _Entry | None:
        try:
            signature = _signature(os.stat(path))
            old = self.files.get(path)
            if old is not None and old.signature == signature and path not in self.racy:
                return old
            data = _read(path)
        except OSError:
            return None  # gone between the listing and the read; the next reload settles it
        digest = _digest(data)
        if old is not None and old.digest == digest:
            return _Entry(signature, digest, old.result)
        try:
            result: AgentDefinition | DefinitionError = decode_definition(
                data, path=path, root=self.root.label
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
        return _Entry(signature, digest, result)


def _relevant(item: os.DirEntry[str]) -> bool:
    """``*.md`` files and the directories below (hidden ones, such as ``.git``, are skipped)."""
    if item.is_dir(follow_symlinks=False):
        return not item.name.startswith(".")
    return item.name.endswith(".md") and item.is_file()


def _listing(path: str) -> frozenset[str]:
    return frozenset(item.name for item in os.scandir(path) if _relevant(item))


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(MAX_BYTES + 1)


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


class Catalog:
    """All definitions, the winner for each name, and dispatch with the fallback policy."""

    def __init__(
        self,
        *,
        project: Path | None,
        workspace: Path | None = None,
        home: Path | None = None,
        settings: Settings | None = None,
    ) -> None:
        home = home if home is not None else membrane_home()
        workspace = workspace if workspace is not None else project
        self.project = project
        self.settings = (
            settings if settings is not None else load_settings(project=project, home=home)
        )
        candidates = [Root("global", home / "agents")]
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
        self._scans = [_RootScan(root) for root in self.roots]
        self.errors: list[DefinitionError] = []
        self.warnings: list[DefinitionWarning] = []
        self.shadowed: Mapping[str, list[AgentDefinition]] = MappingProxyType({})
        self._winners: Mapping[str, AgentDefinition] = MappingProxyType({})
        self._loaded = False
        self.reload()

    def reload(self) -> bool:
        """Bring the catalog up to date; True when anything changed. Stat-only when nothing did."""
        changed = not self._loaded
        for scan in self._scans:
            if not self._loaded or not scan.unchanged():
                scan.rescan()
                changed = True
        if changed:
            self._rebuild()
            self._loaded = True
        return changed

    def _rebuild(self) -> None:
        errors: list[DefinitionError] = []
        warnings: list[DefinitionWarning] = []
        # (precedence, definition): (root rank, 1 for the root's own winner, 0 for a duplicate).
        candidates: dict[str, list[tuple[tuple[int, int], AgentDefinition]]] = {}
        for definition in builtin_definitions():
            candidates.setdefault(definition.name, []).append(((0, 1), definition))
        for rank, scan in enumerate(self._scans, start=1):
            seen: dict[str, AgentDefinition] = {}
            for path in sorted(scan.files, key=lambda p: Path(p).parts):
                result = scan.files[path].result
                if isinstance(result, DefinitionError):
                    errors.append(result)
                    continue
                first = seen.setdefault(result.name, result)
                if first is not result:
                    warnings.append(
                        DefinitionWarning(
                            result.path,
                            result.lines.get("name"),
                            "duplicate-name",
                            f"`{result.name}` is also defined by {first.path}, which comes first "
                            "in path order and wins; this file is ignored",
                        )
                    )
                    candidates.setdefault(result.name, []).append(((rank, 0), result))
                    continue
                candidates.setdefault(result.name, []).append(((rank, 1), result))
        winners: dict[str, AgentDefinition] = {}
        shadowed: dict[str, list[AgentDefinition]] = {}
        for name, found in candidates.items():
            ordered = [d for _, d in sorted(found, key=lambda pair: pair[0], reverse=True)]
            winners[name] = ordered[0]
            if len(ordered) > 1:
                shadowed[name] = ordered[1:]
        self._winners = MappingProxyType(dict(sorted(winners.items())))
        self.shadowed = MappingProxyType(shadowed)
        self.errors = errors
        self.warnings = warnings

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

    def dispatch(self, agent_type: str) -> Dispatch:
        """Resolve an agent type, following ``fallback_subagent`` when it is unknown, disabled
        or ambiguous. ``UnknownSubagent`` when the policy is ``none`` or the fallback is missing."""
        found, why = self.lookup(agent_type)
        if found is not None and found.is_enabled:
            note = None
            if found.name != agent_type:
                note = f"`{agent_type}` matched `{found.name}` (names match case-insensitively)"
            return Dispatch(found, agent_type, note)
        if found is not None:
            why = f"is disabled ({found.path})"
        policy = self.settings.fallback_subagent
        if policy is not None and policy.strip().lower() == "none":
            raise self._unknown(agent_type, why, "fallback_subagent is `none`, which fails closed")
        target = policy if policy is not None else DEFAULT_FALLBACK
        fallback, fallback_why = self.lookup(target)
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
