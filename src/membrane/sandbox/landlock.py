"""The Landlock backend: the kernel's own access control, reached without any extra binary.

The command runs under :mod:`membrane.sandbox.landlock_exec`, a small helper that restricts
itself with Landlock rules before ``exec``. Landlock *adds* rights beneath folders and can never
take one away beneath a folder it granted, so a :class:`Boundary` is carved out like this:

* the checkout is writable through its existing top-level entries: every top-level folder other
  than a control path as a whole tree, every top-level file as a single file;
* the agent's memory folders, a worktree's admin folder and object store, and a private
  temporary folder made for the call (``TMPDIR``) are writable trees;
* ``/dev/null``, ``/dev/zero``, ``/dev/full`` and ``/dev/tty`` may be written;
* nothing else may be written, and reading and executing stay allowed everywhere.

What it cannot carve out (honestly):

* **new entries at the checkout's top level**: a file or folder that did not exist when the
  call started cannot be created directly in the checkout (inside its existing folders it can),
  and top-level entries cannot be removed or renamed, because granting those rights on the
  checkout would grant them beneath ``.git`` and the catalog roots too;
* **control paths deeper down**: a ``.git`` below the top level is writable;
* a worktree's ``commondir`` and ``gitdir`` files inside its (writable) admin folder: the
  runner puts them back when the command ends (``Boundary.pinned``);
* **network**: with the network off, TCP ``bind``/``connect`` are refused (ABI 4 and later)
  and a seccomp filter refuses ``socket()`` for every family but ``AF_UNIX``; Unix sockets on
  the file system stay reachable;
* **process lifetime**: there is no PID namespace. The helper is a child subreaper and kills
  every process the command left behind (``setsid``, ``nohup`` and double forks included) when
  the command ends, times out or is stopped; if Membrane itself is killed with ``SIGKILL``, a
  process that left the command's process group can survive.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from membrane.sandbox.boundary import Boundary
from membrane.sandbox.machine import machine_support
from membrane.sandbox.paths import CATALOG_ROOTS, GIT_ENTRY

__all__ = ["HELPER", "landlock_argv", "landlock_grants"]

#: The helper script, run by path so that it imports nothing but the standard library.
HELPER = Path(__file__).with_name("landlock_exec.py")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
_CONTROL = {name.casefold() for name in (GIT_ENTRY, *CATALOG_ROOTS)}


def landlock_grants(boundary: Boundary, tmp: Path) -> tuple[list[str], list[str]]:
    """``(trees, files)`` the command may write under ``boundary``, with ``tmp`` private."""
    trees: list[str] = [str(tmp)]
    files: list[str] = [d for d in _DEVICES if os.path.exists(d)]
    for root in boundary.writable[:1]:
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.name.casefold() in _CONTROL:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    trees.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    files.append(entry.path)
    trees += [str(p) for p in (*boundary.writable[1:], *boundary.reopened)]
    return trees, files


def landlock_argv(boundary: Boundary, argv: Sequence[str], *, tmp: Path) -> list[str]:
    """``argv`` wrapped in the Landlock helper, for ``boundary`` with ``tmp`` as ``TMPDIR``."""
    trees, files = landlock_grants(boundary, tmp)
    head = [str(machine_support().landlock_abi), "1" if boundary.network else "0", str(tmp)]
    grants = [f"w:{t}" for t in trees] + [f"f:{f}" for f in files]
    return [sys.executable, "-I", "-S", str(HELPER), *head, *grants, "--", *argv]
