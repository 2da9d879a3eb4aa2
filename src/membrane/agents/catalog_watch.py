"""The catalog's reloads from the second on: a directory watcher (``membrane.agents.watch``) on
every root's known directories, each absent root watched through its nearest existing folder
for the entry that would lead to it appearing, and what changed according to the watcher.

``Catalog.reload`` arms a ``CatalogWatch`` at its second reload (the stat walk decides that
once, and whenever the watch cannot say exactly what changed); a command that loads the
catalog once (``agents list``, ``explain``) never imports this module.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from membrane.agents.scan import Scan
from membrane.agents.watch import DirectoryWatcher

__all__ = ["CatalogWatch"]


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
