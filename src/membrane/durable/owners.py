"""Who holds a receipt or a lease: an owner id that a successor can judge dead or alive.

An owner id is ``host:pid:random:boot:start:pidns``: the host name, the process id, a random
part (two runtimes of one process differ), the kernel's boot id, the process's start time in
clock ticks since boot and its pid namespace (the last three read from ``/proc`` on Linux,
empty elsewhere). ``gone(owner)`` is true only when the owner is certainly dead:

* same host, and the machine booted again since (another boot id); or
* same host, boot and pid namespace, and no process with that pid runs now, or the one that
  does started at another time (the pid was reused), or it is a zombie (killed, not yet
  reaped by its parent).

and ``judge(owner)`` is ``alive`` when that very process runs. Anything else (another host,
another pid namespace, an id without these parts) is ``unknown``: a receipt it holds waits for
its TTL.
"""

from __future__ import annotations

import os
import socket
import uuid
from functools import cache
from pathlib import Path
from typing import Literal

from membrane.store.base import Receipt, Store

__all__ = ["cleared", "gone", "judge", "new_owner"]


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""


def _stat(pid: int) -> tuple[str, str] | None:
    """The state letter and start time of process ``pid``, or ``None`` when there is none."""
    text = _read(f"/proc/{pid}/stat")
    # The command name (field 2) is in parentheses and may hold spaces or ')'.
    _, paren, rest = text.rpartition(")")
    if not paren:
        return None
    fields = rest.split()
    if len(fields) < 20:
        return None
    return fields[0], fields[19]  # state (field 3), starttime (field 22)


def _pidns(pid: int | str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid").removeprefix("pid:").strip("[]")
    except OSError:
        return ""


@cache
def _boot() -> str:
    return _read("/proc/sys/kernel/random/boot_id").strip()


def new_owner() -> str:
    """An owner id for this process (see the module docstring)."""
    pid = os.getpid()
    found = _stat(pid)
    start = "" if found is None else found[1]
    parts = (socket.gethostname(), str(pid), uuid.uuid4().hex[:8], _boot(), start, _pidns(pid))
    return ":".join(parts)


def judge(owner: str) -> Literal["gone", "alive", "unknown"]:
    """Whether the process ``owner`` names has certainly ended, certainly runs, or cannot be
    told from here (see the module docstring)."""
    parts = owner.split(":")
    if len(parts) != 6 or not parts[1].isdigit() or parts[0] != socket.gethostname():
        return "unknown"
    _, pid, _, boot, start, pidns = parts
    here = _boot()
    if not boot or not here:
        return "unknown"
    if boot != here:
        return "gone"
    if not start or not pidns or pidns != _pidns("self"):
        return "unknown"
    found = _stat(int(pid))
    if found is None or found[0] in ("Z", "X") or found[1] != start:
        return "gone"
    return "alive"


def gone(owner: str) -> bool:
    """Whether the process ``owner`` names has certainly ended."""
    return judge(owner) == "gone"


def cleared(store: Store, receipt: Receipt) -> bool:
    """Release ``receipt`` when it is pending and its owner is certainly dead (a process of
    this host that no longer runs: ``durable.owners``); whether it did. Only that owner's
    receipt is deleted, never one a live process wrote meanwhile."""
    if receipt.status != "pending" or receipt.owner is None or not gone(receipt.owner):
        return False
    store.release_receipt(receipt.request_id, owner=receipt.owner)
    return True
