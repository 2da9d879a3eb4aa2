"""What this machine offers as an OS boundary, and which backend a setting chooses.

``bubblewrap`` is used when a ``bwrap`` executable is on ``PATH`` and can actually build a
sandbox here (a probe runs ``bwrap ... true`` once: user namespaces may be disabled, or the
process may lack the rights). ``landlock`` needs a kernel with the Landlock LSM enabled
(ABI 1 or later, asked of the kernel with ``landlock_create_ruleset``). ``guard`` is the shell
guard alone: it reads command text and is not a boundary.

The probe is spawned with ``os.posix_spawn``, without ``subprocess`` (nor ``shutil`` to find
``bwrap``): ``membrane explain`` shows what the machine offers, and those modules (with the
threading, signal and compression modules they import) were a real part of its start.
"""

from __future__ import annotations

import ctypes
import functools
import os
import select
import time
from dataclasses import dataclass
from typing import Final, Literal

from membrane.config.values import SandboxChoice
from membrane.errors import SandboxUnavailable
from membrane.json_types import JSONDict
from membrane.sandbox.executables import which

__all__ = [
    "BWRAP_USER",
    "Backend",
    "MachineSupport",
    "backend_confines",
    "choose_backend",
    "landlock_user_namespace",
    "machine_support",
    "root_note",
]

Backend = Literal["bubblewrap", "landlock", "guard"]

#: ``landlock_create_ruleset`` on every architecture (the syscall table is unified).
SYS_LANDLOCK_CREATE_RULESET: Final = 444
LANDLOCK_CREATE_RULESET_VERSION: Final = 1
#: How long the one-time ``bwrap`` probe may take.
_PROBE_SECONDS: Final = 10.0


@dataclass(frozen=True, slots=True)
class MachineSupport:
    """The backends this machine offers, and why each missing one is missing."""

    bwrap: str | None
    """The ``bwrap`` executable that passed the probe, or ``None``."""
    bwrap_reason: str
    landlock_abi: int
    """The kernel's Landlock ABI version; 0 when Landlock is not available."""
    landlock_reason: str
    bwrap_userns_lock: bool = False
    """Whether this ``bwrap`` can forbid further user namespaces inside (``--disable-userns``,
    bubblewrap 0.8 and later)."""
    root: bool = False
    """Whether Membrane runs as root (effective uid 0): see :func:`root_note`."""

    @property
    def strongest(self) -> Backend:
        if self.bwrap is not None:
            return "bubblewrap"
        if self.landlock_abi > 0:
            return "landlock"
        return "guard"

    def to_json(self) -> JSONDict:
        return {
            "bubblewrap": {"available": self.bwrap is not None, "detail": self.bwrap_reason},
            "landlock": {"available": self.landlock_abi > 0, "detail": self.landlock_reason},
            "strongest": self.strongest,
            "root": self.root,
        }


def _run_probe(argv: list[str]) -> tuple[int | None, str]:
    """Run ``argv`` with no input and its output discarded; its exit code (``None``: it did not
    finish within ``_PROBE_SECONDS`` and was killed) and what it wrote on stderr."""
    read_end, write_end = os.pipe()
    try:
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_DUP2, write_end, 2),
        ]
        pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + _PROBE_SECONDS
    try:
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([read_end], [], [], left)
            if not ready:
                continue
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        else:
            return _killed(pid)
    finally:
        os.close(read_end)
    # Its stderr is closed; the deadline still bounds the wait for it to exit.
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), b"".join(chunks).decode("utf-8", "replace")
        if time.monotonic() >= deadline:
            return _killed(pid)
        time.sleep(0.005)


def _killed(pid: int) -> tuple[None, str]:
    """Kill and reap a probe that did not finish in time."""
    import signal  # only for a probe that hangs

    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None, ""


#: What every sandbox ``bwrap`` builds takes, whoever starts it: a user namespace, no capability.
BWRAP_USER = ("--unshare-user", "--cap-drop", "ALL")


def _probe_bwrap() -> tuple[str | None, str, bool]:
    """``(bwrap, reason, userns_lock)``: the ``bwrap`` that can build a sandbox here with a user
    namespace and every capability dropped (the sandbox never runs without them), and whether
    it can also forbid further user namespaces inside."""
    found = which("bwrap")
    if found is None:
        return None, "no `bwrap` on PATH (install the bubblewrap package)", False
    base = [found, *BWRAP_USER, "--ro-bind", "/", "/", "--unshare-pid", "--die-with-parent"]
    why = ""
    # An older bwrap (before 0.8) does not know --disable-userns: asked again without it.
    for lock in (True, False):
        argv = [*base, *(["--disable-userns"] if lock else []), "true"]
        try:
            code, stderr = _run_probe(argv)
        except OSError as exc:
            return None, f"{found} cannot run here: {exc}", False
        if code is None:
            return (
                None,
                (f"{found} cannot run here: it did not finish in {_PROBE_SECONDS:g} seconds"),
                False,
            )
        if code == 0:
            return found, f"{found} works here", lock
        why = stderr.strip() or f"exit {code}"
    return None, f"{found} cannot build a sandbox here: {why}", False


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none, or not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syscall = libc.syscall
    except (OSError, AttributeError):
        return 0
    syscall.restype = ctypes.c_long
    version = syscall(
        ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET),
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION),
    )
    return max(int(version), 0)


@functools.cache
def machine_support() -> MachineSupport:
    """What this machine offers (probed once per process)."""
    bwrap, bwrap_reason, lock = _probe_bwrap()
    abi = landlock_abi() if os.uname().sysname == "Linux" else 0
    reason = (
        f"the kernel offers Landlock ABI {abi}"
        if abi
        else "the kernel offers no Landlock (not Linux, older than 5.13, or not enabled)"
    )
    return MachineSupport(
        bwrap=bwrap,
        bwrap_reason=bwrap_reason,
        landlock_abi=abi,
        landlock_reason=reason,
        bwrap_userns_lock=lock,
        root=os.geteuid() == 0,
    )


@functools.cache
def landlock_user_namespace() -> bool:
    """As root: whether a Landlock command can take a user namespace of its own here (and so
    run as uid 65534); ``False`` for anyone else and where Landlock is missing. Probed once
    per process, by the helper itself, and only when asked (``membrane doctor``): not on the
    path of ``explain``."""
    import sys

    if os.geteuid() != 0 or not landlock_abi():
        return False
    helper = os.path.join(os.path.dirname(__file__), "landlock_exec.py")
    try:
        code, _ = _run_probe([sys.executable, "-I", "-S", helper, "--probe-userns"])
    except OSError:
        return False
    return code == 0


def root_note(support: MachineSupport) -> str | None:
    """What running as root changes for the sandbox (``None`` when Membrane is not root)."""
    if not support.root:
        return None
    landlock = (
        "Landlock likewise, in a user and an IPC namespace of its own"
        if landlock_user_namespace()
        else "under Landlock a command stays uid 0 without any capability, since user "
        "namespaces cannot be made here"
    )
    return (
        "Membrane runs as root: sandboxed commands still run without any capability and under "
        "no_new_privs; bubblewrap runs them as uid 65534 in a user namespace of their own, "
        f"mapped to root on the host; {landlock}. They cannot mount, remount or bypass file "
        "permissions, but files they create belong to root, and the owner's permission bits "
        "of root's files apply where the sandbox shows them"
    )


#: What each backend confines (``membrane doctor`` says it of the one in force).
_CONFINES: Final = {
    "bubblewrap": (
        "writes to the checkout less its control paths and a private /tmp; reads to the "
        "checkout, the read roots and the system's folders (an empty root: nothing else "
        "exists); its own PID, IPC and (network off) network namespaces; no Unix socket but "
        "the runtime's; every capability dropped, no_new_privs"
    ),
    "landlock": (
        "writes to the checkout's existing entries less its control paths and a private "
        "temporary folder; reads to the checkout, the read roots and the system's folders; "
        "no Unix socket of its own (the runtime socket comes as a descriptor), and with the "
        "network off no socket of any other family; no signal or abstract socket outside "
        "(ABI 6+); every capability dropped, no_new_privs; no PID namespace (what a command "
        "leaves behind is killed when it ends)"
    ),
    "guard": "nothing: the shell guard reads command text only",
}


def backend_confines(backend: Backend) -> str:
    """What ``backend`` confines, in one sentence (docs/isolation.md says it in full)."""
    return _CONFINES[backend]


def choose_backend(choice: SandboxChoice, support: MachineSupport) -> Backend:
    """The backend ``choice`` (the ``sandbox`` setting) selects on this machine.

    ``auto`` is the strongest available. A named backend the machine lacks raises
    :class:`SandboxUnavailable`: Membrane never silently runs with less than was asked for.
    """
    if choice == "auto":
        return support.strongest
    if choice == "bubblewrap" and support.bwrap is None:
        raise SandboxUnavailable(
            f"the settings ask for the bubblewrap sandbox, but {support.bwrap_reason}",
            backend=choice,
            reason=support.bwrap_reason,
        )
    if choice == "landlock" and support.landlock_abi == 0:
        raise SandboxUnavailable(
            f"the settings ask for the Landlock sandbox, but {support.landlock_reason}",
            backend=choice,
            reason=support.landlock_reason,
        )
    return choice
