"""Hard links a writing command could reach a file elsewhere through.

A hard link is one file under several names; the kernel checks a write against the name the
file was opened by. A file inside a command's writable trees that also has a name outside them
(another checkout, the home folder, a read-only control path such as ``.git/config``) would be
changed there by a write through its name inside, under every backend: no mount and no
Landlock rule can tell the names apart. A command cannot make such a link itself (``link``
across mounts or out of a Landlock-granted tree fails with ``EXDEV``), but one can already be
there: made by the user, by a package manager linking from its store (pnpm), by an unsandboxed
command.

:func:`outside_links` finds them: every regular file in the writable trees (less their
read-only carve-outs) whose link count is larger than the number of its names found there. The
runner refuses to start a writing command while any exists (``hard-link-refused``).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from membrane.sandbox.boundary import Boundary

__all__ = ["OutsideLink", "outside_links"]


@dataclass(frozen=True, slots=True)
class OutsideLink:
    """A file a command may write with ``links`` names, ``inside`` of them in its writable
    trees; ``path`` is one of those."""

    path: Path
    links: int
    inside: int


def outside_links(boundary: Boundary, *, limit: int = 5) -> tuple[OutsideLink, ...]:
    """Up to ``limit`` files in ``boundary``'s writable trees with a name outside them (none
    for a boundary that writes nothing)."""
    # Strings, not Paths, on the way down: this looks at every file a command may write.
    skipped = {str(p) for p in boundary.read_only if p not in boundary.reopened}
    seen: dict[tuple[int, int], OutsideLink] = {}
    walked: set[tuple[int, int]] = set()
    roots = (*boundary.writable, *boundary.reopened)
    pending = [str(p) for p in roots if str(p) not in skipped]
    while pending:
        folder = pending.pop()
        try:
            status = os.lstat(folder)
        except OSError:
            continue
        if not stat.S_ISDIR(status.st_mode) or (status.st_dev, status.st_ino) in walked:
            continue
        walked.add((status.st_dev, status.st_ino))
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.path in skipped:
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                            continue
                        if not entry.is_file(follow_symlinks=False):
                            continue
                        found = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if found.st_nlink < 2:
                        continue
                    key = (found.st_dev, found.st_ino)
                    record = seen.get(key)
                    if record is None:
                        seen[key] = OutsideLink(Path(entry.path), found.st_nlink, 1)
                    else:
                        seen[key] = replace(record, inside=record.inside + 1)
        except OSError:
            continue
    out = [link for link in seen.values() if link.inside < link.links]
    return tuple(sorted(out, key=lambda link: link.path)[:limit])
