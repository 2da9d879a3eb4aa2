"""The bubblewrap backend: a command line for ``bwrap`` that enforces a :class:`Boundary`.

The command sees the whole file system read-only (``--ro-bind / /``), then:

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
* ``--new-session``: no access to a controlling terminal (no ``TIOCSTI`` injection).

Unix sockets on the file system stay reachable (connecting is not writing); the membrane
socket is how a child's command can call back.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from membrane.sandbox.boundary import Boundary

__all__ = ["bwrap_argv"]

_PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")


def bwrap_argv(bwrap: str, boundary: Boundary, argv: Sequence[str], *, cwd: Path) -> list[str]:
    """``argv`` wrapped in ``bwrap`` so that it runs under ``boundary`` in ``cwd``."""
    out = [
        bwrap,
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
    ]
    if not boundary.network:
        out.append("--unshare-net")
    out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for folder in _PRIVATE_TMP:
        out += ["--tmpfs", folder]
    # Bound again where a private tmp folder would hide them (a checkout under /tmp).
    for path in boundary.visible:
        hidden = any(path.is_relative_to(folder) for folder in _PRIVATE_TMP)
        if hidden and not any(path.is_relative_to(tree) for tree in boundary.writable):
            out += ["--ro-bind", str(path), str(path)]
    for path in boundary.writable:
        out += ["--bind", str(path), str(path)]
    for path in boundary.read_only:
        out += ["--ro-bind", str(path), str(path)]
    for path in boundary.reopened:
        out += ["--bind", str(path), str(path)]
    out += ["--setenv", "TMPDIR", "/tmp", "--chdir", str(cwd), "--", *argv]
    return out
