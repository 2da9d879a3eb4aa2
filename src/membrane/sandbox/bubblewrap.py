"""The bubblewrap backend: a command line for ``bwrap`` that enforces a :class:`Boundary`.

The command starts from an empty root into which only what it may read is bound, read-only
(:mod:`membrane.sandbox.reads`): the system's folders (``/usr``, ``/etc``, ...; ``/bin`` and
the like as the same links as on the host), its checkout and repository, the read roots,
Membrane's installation and what the host's command line names; the hidden places among them
(``$MEMBRANE_HOME``, ``/etc/shadow``, ``~/.ssh``, ...) are covered with an empty read-only
folder or file. Then:

* a fresh ``/dev`` (``--dev``), a fresh ``/proc`` of its own PID namespace, and private, empty
  ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (tmpfs, discarded with the sandbox);
* its writable trees bound read-write, the control paths inside them bound read-only on top
  (a read-only bind mount cannot be written, removed, renamed over or replaced, whatever the
  program: the kernel refuses with ``EROFS`` or ``EBUSY``), the agent's memory folders
  read-write again on top of those;
* new PID and IPC namespaces, and a new network namespace (only a loopback of its
  own) unless the network is allowed. In the PID namespace ``bwrap`` is process 1: when the
  command ends, or Membrane dies (``--die-with-parent``), every process left in it is killed,
  so ``setsid``, ``nohup`` and double forks cannot outlive the call;
* ``--new-session``: no access to a controlling terminal (no ``TIOCSTI`` injection);
* whoever starts it, a user namespace of its own (``--unshare-user``), every capability dropped
  (``--cap-drop ALL``: the effective, permitted, inheritable, ambient and bounding sets are
  empty) and ``no_new_privs`` (``bwrap`` sets it on every sandbox it builds), and, where
  ``bwrap`` can (0.8 and later), no further user namespace (``--disable-userns``). Started by
  root, the command runs as uid and gid 65534 inside (still root on the host, for the file
  system: what it may touch is what the mounts show it); started by another user, as that user.
  Either way it holds no capability in any namespace that owns a mount it sees, so no
  ``mount``, ``remount``, ``umount`` or ``pivot_root`` reaches the host's mounts or its own:
  a nested user namespace (where allowed) gets copies of the mounts, locked read-only.

Unix sockets on the file system stay reachable (connecting is not writing); the membrane
socket is how a child's command can call back.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from membrane.sandbox.boundary import Boundary
from membrane.sandbox.machine import BWRAP_USER
from membrane.sandbox.reads import SYSTEM_ROOTS

__all__ = ["NOBODY", "bwrap_argv"]

_PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")
#: The uid and gid a command started by root runs as inside its user namespace.
NOBODY = "65534"


def _cover(path: Path, sealed: list[str]) -> list[str]:
    """Arguments that hide ``path``: an empty folder (made read-only once everything is bound,
    ``sealed``, so that a tree shown again inside it can still be bound), or an empty file."""
    if not os.path.lexists(path):
        return []
    if path.is_dir():
        sealed += ["--remount-ro", str(path)]
        return ["--tmpfs", str(path)]
    return ["--ro-bind", os.devnull, str(path)]


def bwrap_argv(
    bwrap: str,
    boundary: Boundary,
    argv: Sequence[str],
    *,
    cwd: Path,
    root: bool = False,
    userns_lock: bool = False,
) -> list[str]:
    """``argv`` wrapped in ``bwrap`` so that it runs under ``boundary`` in ``cwd``. ``root``:
    Membrane runs as root (the command gets uid 65534 inside); ``userns_lock``: this ``bwrap``
    takes ``--disable-userns``."""
    out = [bwrap, *BWRAP_USER]
    if root:
        out += ["--uid", NOBODY, "--gid", NOBODY]
    if userns_lock:
        out.append("--disable-userns")
    out += [
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
    ]
    if not boundary.network:
        out.append("--unshare-net")
    # An empty root: only what the command may read is bound into it (reads stay home).
    for name in SYSTEM_ROOTS:
        if os.path.islink(name):
            out += ["--symlink", os.readlink(name), name]  # /bin -> usr/bin
    out += ["--dev", "/dev", "--proc", "/proc"]
    for folder in _PRIVATE_TMP:
        out += ["--tmpfs", folder]
    shown = dict.fromkeys((*boundary.readable, *boundary.visible))
    # Shallow first, so a hidden place covers what lies under it and a deeper tree that is
    # shown again (the runtime socket inside $MEMBRANE_HOME) is bound on top of it.
    layers = sorted(
        [(path, False) for path in shown] + [(path, True) for path in boundary.hidden],
        key=lambda entry: (len(entry[0].parts), entry[1]),
    )
    late: list[Path] = []
    sealed: list[str] = []
    bound: list[Path] = []
    covered: list[Path] = []
    for path, hide in layers:
        if hide and any(path.is_relative_to(tree) for tree in boundary.writable):
            late.append(path)  # covered after the writable trees are bound
        elif hide:
            out += _cover(path, sealed)
            covered.append(path)
        elif not any(path.is_relative_to(tree) for tree in boundary.writable) and not any(
            path.is_relative_to(tree)
            and not any(hole.is_relative_to(tree) and path.is_relative_to(hole) for hole in covered)
            for tree in bound
        ):
            out += ["--ro-bind", str(path), str(path)]
            bound.append(path)
    for path in boundary.writable:
        out += ["--bind", str(path), str(path)]
    for path in boundary.read_only:
        out += ["--ro-bind", str(path), str(path)]
    for path in boundary.reopened:
        out += ["--bind", str(path), str(path)]
    for hole in late:
        out += _cover(hole, sealed)
        for path in shown:
            if path != hole and path.is_relative_to(hole):
                out += ["--ro-bind", str(path), str(path)]
    out += sealed
    out += ["--setenv", "TMPDIR", "/tmp", "--chdir", str(cwd), "--", *argv]
    return out
