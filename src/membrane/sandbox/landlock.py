"""The Landlock backend: the kernel's own access control, reached without any extra binary.

The command runs under :mod:`membrane.sandbox.landlock_exec`, which confines the process that
starts it with Landlock rules, a seccomp filter and dropped privileges: a ``Bash`` call or a
hook through the process's one spawn helper (:mod:`membrane.sandbox.landlock_spawn`, no
interpreter per call), a long-lived child through a helper process of its own. Landlock
*adds* rights beneath folders and can never take one away beneath a folder it granted, so a
:class:`Boundary` is carved out like this:

* the checkout is writable through its existing top-level entries: every top-level folder other
  than a control path as a whole tree, every top-level file as a single file;
* the agent's memory folders, a worktree's admin folder and object store, and a private
  temporary folder made for the call (``TMPDIR``) are writable trees;
* ``/dev/null``, ``/dev/zero``, ``/dev/full`` and ``/dev/tty`` may be written;
* nothing else may be written;
* reading and executing are granted beneath the trees the boundary shows (``visible`` and
  ``readable``: :mod:`membrane.sandbox.reads`), ``/proc`` (other processes' entries are
  refused by Landlock's own ptrace rule) and a few devices; a folder that holds a hidden
  place (``/etc`` holds ``/etc/shadow``) is granted entry by entry around it, and may itself
  only be listed.

What it cannot carve out (honestly):

* **new entries at the checkout's top level**: a file or folder that did not exist when the
  call started cannot be created directly in the checkout (inside its existing folders it can),
  and top-level entries cannot be removed or renamed, because granting those rights on the
  checkout would grant them beneath ``.git`` and the catalog roots too;
* **control paths deeper down**: a ``.git`` below the top level is writable;
* a worktree's ``commondir`` and ``gitdir`` files inside its (writable) admin folder: the
  runner puts them back when the command ends (``Boundary.pinned``);
* **Unix sockets on the file system**: Landlock does not govern ``connect``, so the seccomp
  filter refuses the command any Unix socket of its own (socket pairs excepted), and the
  runtime socket is handed to it as a connector (:mod:`membrane.sandbox.connector`); with the
  network off, TCP ``bind``/``connect`` are refused (ABI 4 and later) and ``socket()`` of every
  other family too;
* **process lifetime**: there is no PID namespace. The supervisor is a child subreaper and kills
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

__all__ = [
    "HELPER",
    "NOBODY",
    "landlock_args",
    "landlock_argv",
    "landlock_grants",
    "landlock_reads",
]

#: The helper script, run by path so that it imports nothing but the standard library.
HELPER = Path(__file__).with_name("landlock_exec.py")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
#: Devices a command may read (never a disk: root without capabilities still owns those).
_READ_DEVICES = (*_DEVICES, "/dev/random", "/dev/urandom", "/dev/pts")
_CONTROL = {name.casefold() for name in (GIT_ENTRY, *CATALOG_ROOTS)}
#: The uid a command runs as, in a user namespace of its own, when Membrane runs as root.
NOBODY = 65534


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


def landlock_reads(boundary: Boundary) -> tuple[list[str], list[str]]:
    """``(trees, folders)``: the trees (or single files) the command may read and execute,
    and the folders it may only list: those that hold a hidden place, granted entry by entry
    around it (Landlock cannot take a right back beneath a folder it granted)."""
    trees: list[str] = ["/proc", *(d for d in _READ_DEVICES if os.path.exists(d))]
    folders: list[str] = []
    # Strings, not Paths: this runs at every command, over every entry of /etc.
    holes = tuple(str(hole) for hole in boundary.hidden)
    for root in dict.fromkeys((*boundary.visible, *boundary.readable)):
        _carve(str(root), holes, trees, folders)
    return trees, folders


def _carve(root: str, holes: tuple[str, ...], trees: list[str], folders: list[str]) -> None:
    if root in holes:
        return
    prefix = root.rstrip("/") + "/"
    inside = tuple(hole for hole in holes if hole.startswith(prefix))
    if not inside:
        trees.append(root)
        return
    folders.append(root)
    # Only the entries that hold a hidden place are looked into again; the rest are trees.
    holding = {hole[len(prefix) :].split("/", 1)[0] for hole in inside}
    try:
        with os.scandir(root) as entries:
            names = [(entry.name, entry.path) for entry in entries]
    except OSError:
        return
    for name, path in names:
        if name in holding:
            _carve(path, inside, trees, folders)
        else:
            trees.append(path)


def landlock_args(
    boundary: Boundary, argv: Sequence[str], *, tmp: Path, root: bool = False
) -> list[str]:
    """The helper's arguments for ``argv`` under ``boundary`` with ``tmp`` as ``TMPDIR``
    (:mod:`membrane.sandbox.landlock_exec`); ``root``: Membrane runs as root, so the command
    runs as :data:`NOBODY` in a user namespace of its own."""
    trees, files = landlock_grants(boundary, tmp)
    reads, folders = landlock_reads(boundary)
    network = "1" if boundary.network else "0"
    head = [str(machine_support().landlock_abi), network, str(tmp), str(NOBODY) if root else "-"]
    grants = [f"w:{t}" for t in trees] + [f"f:{f}" for f in files]
    grants += [f"r:{r}" for r in reads] + [f"d:{d}" for d in folders]
    return [*head, *grants, "--", *argv]


def landlock_argv(
    boundary: Boundary, argv: Sequence[str], *, tmp: Path, root: bool = False
) -> list[str]:
    """``argv`` wrapped in the Landlock helper, for ``boundary`` with ``tmp`` as ``TMPDIR``:
    the way a long-lived child starts (one interpreter for its whole life)."""
    args = landlock_args(boundary, argv, tmp=tmp, root=root)
    return [sys.executable, "-I", "-S", str(HELPER), *args]
