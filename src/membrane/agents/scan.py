"""Scanning one root for the catalog: what its directories and files looked like last time,
and what changed since, at the cost the catalog's ``reload()`` promises.

``RootScan`` keeps a directory tree of ``*.md`` files; ``ConfigScan`` keeps one config file
holding several definitions (``opencode.json``). Both answer ``unchanged()`` from stats alone
(plus content for "racy" paths, whose timestamp is too recent to trust), ``rescan()`` the whole
root, and ``apply()`` what a directory watcher saw (``membrane.agents.watch``). A file is parsed
only when its content changed; whatever parsing one file raises becomes a ``DefinitionError``
for that path.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from membrane.agents.builtins import decode_definition
from membrane.agents.cache import DefinitionCache
from membrane.agents.definition import AgentDefinition
from membrane.agents.files import content_digest, read_file_bytes
from membrane.agents.roots import Root
from membrane.errors import DefinitionError

if TYPE_CHECKING:  # the watcher (ctypes) is imported only when a second reload arms it
    from membrane.agents.watch import Change, DirectoryWatcher

__all__ = ["ConfigScan", "RootScan", "Scan"]

#: A timestamp this close to "now" may share a clock tick with a later write.
_RACY_NS = 100_000_000
#: How long before it is read a file must have last changed for the definition cache to
#: record its stat for other processes: two seconds, a coarse file system's clock tick (a
#: change in the same tick as the one recorded would leave the same stat).
_SETTLED_NS = 2_000_000_000

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


def _settled(signature: Signature, now: int) -> bool:
    return now - max(signature[0], signature[1]) >= _SETTLED_NS


class RootScan:
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
            # An absent root: ``access`` answers without raising when it is still absent.
            root = self.root.directory
            return not os.access(root, os.F_OK) or not os.path.isdir(root)
        try:
            for path, (sig, names) in self.dirs.items():
                if _signature(os.stat(path)) != sig:
                    return False
                if path in self.racy and _listing(path) != names:
                    return False
            for path, entry in self.files.items():
                if _file_signature(path) != entry.signature:
                    return False
                if path in self.racy and content_digest(read_file_bytes(path)) != entry.digest:
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
            if not name.endswith(self.root.suffix):
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
                suffix = self.root.suffix
                entries = [item for item in os.scandir(current) if _relevant(item, suffix)]
            except OSError as exc:
                # An absent root is the usual case; a folder that is there but cannot be
                # listed (no permission, a symlink loop) is reported, and the walk goes on.
                if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                    unreadable = _unlistable(current, exc)
                    if unreadable is not None:
                        files[current] = unreadable
                continue
            dirs[current] = (sig, frozenset(item.name for item in entries))
            if _racy(sig, now):
                racy.add(current)
            for item in entries:
                if item.is_dir(follow_symlinks=False):
                    stack.append(item.path)
                    continue
                entry = self._entry(item.path, now)
                if entry is not None:
                    files[item.path] = entry
                    if _racy(entry.signature, now):
                        racy.add(item.path)
        return dirs, files, racy

    def _entry(self, path: str, now: int | None = None) -> _Entry | None:
        """The entry of the file ``path``: its old one while its signature holds, else the
        definition cache's (unread when the cache recorded the same trusted signature, else by
        the content's digest), else a parse. ``now``: when the walk began (``time_ns``)."""
        try:
            signature = _signature(os.stat(path))
            old = self.files.get(path)
            if old is not None and old.signature == signature and path not in self.racy:
                return old
            # Trusted: changed long enough before now that a later change has a newer ctime.
            trusted = _settled(signature, time.time_ns() if now is None else now)
            key = self.root.cache_key
            if old is None and trusted:
                known = self.cache.known(path, root=key, signature=signature)
                if known is not None:
                    return _Entry(signature, known[0], known[1])
            data = read_file_bytes(path)
        except OSError as exc:
            return _unreadable(path, exc)
        digest = content_digest(data)
        if old is not None and old.digest == digest:
            return _Entry(signature, digest, old.result)
        label = self.root.label
        kept = signature if trusted else None
        cached = self.cache.get(path, root=key, digest=digest, signature=kept)
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
            self.cache.put(path, root=key, digest=digest, definition=result, signature=kept)
        return _Entry(signature, digest, result)


class ConfigScan:
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
        if self._signature is None and not os.access(path, os.F_OK):
            return True  # still absent, known without a raised error
        try:
            signature: Signature | None = _signature(os.stat(path))
        except OSError:
            signature = None
        if signature != self._signature:
            return False
        if self._racy and signature is not None:
            try:
                if content_digest(read_file_bytes(path)) != self._digest:
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
        digest = content_digest(data)
        if digest != self._digest:
            from membrane.agents.opencode_config import read_opencode_config  # a config to read

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


def _relevant(item: os.DirEntry[str], suffix: str = ".md") -> bool:
    """``*.md`` entries (``*.toml`` for Codex: ``suffix``) that are not directories and the
    directories below (hidden ones, such as ``.git``, are skipped). A symlink loop, dangling
    link or FIFO of that name is relevant: it is reported as an unusable file, and never hides
    its neighbours."""
    if item.is_dir(follow_symlinks=False):
        return not item.name.startswith(".")
    if not item.name.endswith(suffix):
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


def _unlistable(path: str, exc: OSError) -> _Entry | None:
    """The entry of a definitions folder that is there but cannot be listed."""
    return _failed(
        path,
        f"this definitions folder cannot be listed: {exc.strerror or exc}",
        "make the folder readable (or remove the link), or turn its root off in the settings",
    )


def _unreadable(path: str, exc: OSError) -> _Entry | None:
    """The entry of a ``*.md`` that cannot be read: ``None`` when nothing is there any more
    (gone between the listing and the read; the next reload settles it), else an error that
    names why (a symlink loop, a dangling link, a FIFO, no permission)."""
    return _failed(
        path,
        f"cannot be read: {exc.strerror or exc}",
        "make it a readable regular file (or a link to one), or remove it",
    )


def _failed(path: str, message: str, hint: str) -> _Entry | None:
    """An error entry for ``path``, keyed by its link's own signature; ``None`` when nothing
    is there any more."""
    try:
        signature = _signature(os.lstat(path))
    except OSError:
        return None
    error = DefinitionError(
        message, path=path, line=1, hint=f"{hint}; the other definitions are unaffected"
    )
    return _Entry(signature, b"", error)


def _listing(path: str) -> frozenset[str]:
    return frozenset(item.name for item in os.scandir(path) if _relevant(item))


Scan = RootScan | ConfigScan
