"""Run one command under Landlock rules, and kill what it leaves behind (stdlib only).

Started as ``python -I -S landlock_exec.py ABI NETWORK TMP [w:TREE | f:FILE | r:TREE | d:DIR]...
-- ARGV...`` by the Landlock backend: ``ABI`` is the kernel's Landlock ABI version, ``NETWORK``
``1`` when TCP is allowed, ``TMP`` the private temporary folder, then the trees (``w:``) and
single files (``f:``) that may be written (and read), the trees that may be read and executed
(``r:``) and the folders that may only be listed (``d:``). Nothing else may be read.

This process becomes a *child subreaper*, forks, and in the child restricts itself before
``exec``: it drops every capability (when it holds any, as it does when Membrane runs as root:
the bounding and ambient sets are emptied and root's privileges are locked off with the
securebits, so no later ``exec`` of any program, setuid or not, gives one back), sets
``no_new_privs``, calls ``landlock_restrict_self`` and, with the network off, installs a
seccomp filter that refuses ``socket()`` for every family but ``AF_UNIX`` (and
``io_uring_setup``, which can make sockets too). The command and everything it starts may write
only beneath ``write`` (trees) and to ``files`` (single files), may neither bind nor connect TCP
unless ``network``, and (ABI 6 and later) may not signal processes or reach abstract Unix
sockets outside its own domain.
Every process the command leaves behind, including one that called ``setsid`` or double-forked
(orphans are re-parented to this subreaper), is killed when the command ends or when this
process gets ``SIGTERM``.

It imports nothing from Membrane, and nothing slow from the standard library (no ``json``, no
``re``), so that it starts fast.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446
_PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER, _PR_SET_PDEATHSIG = 38, 36, 1
_PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 28, 47, 4
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
#: NOROOT, NO_SETUID_FIXUP, KEEP_CAPS and NO_CAP_AMBIENT_RAISE, each with its lock bit.
_SECUREBITS_LOCKED_DOWN = 0xEF
_CAP_VERSION_3 = 0x20080522
#: (audit arch, socket, io_uring_setup) syscall numbers where the network filter is known.
_SECCOMP_ARCHES = {"x86_64": (0xC000003E, 41, 425), "aarch64": (0xC00000B7, 198, 425)}
_AF_UNIX, _EAFNOSUPPORT, _ENOSYS = 1, 97, 38
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2

# Write-side file system rights by the ABI that introduced them.
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_EXECUTE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 2, 1 << 3
_READ = _EXECUTE | _READ_FILE | _READ_DIR
#: The rights a rule on a single file (not a folder) may hold.
_FILE_ONLY = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _fs_rights(abi: int) -> int:
    rights = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    return rights


def _restrict(libc: ctypes.CDLL, abi: int, network: bool, grants: list[str]) -> None:
    libc.syscall.restype = ctypes.c_long
    writes = _fs_rights(abi)
    handled = writes | _READ
    attr = _RulesetAttr(handled_access_fs=handled)
    size = 8
    if abi >= 4:
        size = 16
        if not network:
            attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
    if abi >= 6:
        size = 24
        attr.scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL
    fd = libc.syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    file_rights = _WRITE_FILE | _READ_FILE | (_TRUNCATE if abi >= 3 else 0)
    by_kind = {"w:": handled, "f:": file_rights, "r:": _READ, "d:": _READ_DIR}
    for grant in grants:
        kind, path = grant[:2], grant[2:]
        rights = by_kind[kind]
        try:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # a path that vanished grants nothing
        if os.fstat(target).st_mode & 0o170000 != 0o040000:  # not a folder
            rights &= _FILE_ONLY
            if not rights:
                os.close(target)
                continue
        rule = _PathBeneath(allowed_access=rights, parent_fd=target)
        done = libc.syscall(
            _SYS_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule),
            ctypes.c_uint32(0),
        )  # fmt: skip
        os.close(target)
        if done < 0 and kind in ("w:", "f:"):  # a read grant that cannot be made grants less
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.syscall(_SYS_RESTRICT, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    os.close(fd)


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    """Drop every capability for good (nothing to do for a process that holds none)."""
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    if libc.capget(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    if not any(data) and os.geteuid() != 0:
        return
    # The securebits and the bounding set need CAP_SETPCAP: both before the sets are emptied.
    if libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS_LOCKED_DOWN, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECUREBITS) failed")
    cap = 0
    while libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    if cap == 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if libc.capset(header, (ctypes.c_uint32 * 6)()) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def _refuse_sockets(libc: ctypes.CDLL) -> None:
    """With the network off: ``socket()`` of any family but ``AF_UNIX`` fails with
    ``EAFNOSUPPORT``; ``io_uring_setup`` with ``ENOSYS``; x32 system calls likewise; a process
    of another architecture (32-bit code on a 64-bit kernel) is killed at its first call."""
    known = _SECCOMP_ARCHES.get(os.uname().machine)
    if known is None:
        raise OSError(_ENOSYS, f"no network filter for {os.uname().machine}")
    arch, socket_nr, uring_nr = known
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, errno_base, kill = 0x7FFF0000, 0x00050000, 0x80000000
    program = [
        (ld, 0, 0, 4),  # 0: the architecture
        (jeq, 1, 0, arch),  # 1: native? go on : kill
        (ret, 0, 0, kill),  # 2
        (ld, 0, 0, 0),  # 3: the system call number
        (jge, 7, 0, 0x40000000),  # 4: x32 -> 12
        (jeq, 3, 0, socket_nr),  # 5: socket -> 9
        (jeq, 1, 0, uring_nr),  # 6: io_uring_setup -> 8
        (ret, 0, 0, allow),  # 7
        (ret, 0, 0, errno_base | _ENOSYS),  # 8
        (ld, 0, 0, 16),  # 9: socket's family (the low half of its first argument)
        (jeq, 2, 0, _AF_UNIX),  # 10: AF_UNIX -> 13
        (ret, 0, 0, errno_base | _EAFNOSUPPORT),  # 11
        (ret, 0, 0, errno_base | _ENOSYS),  # 12
        (ret, 0, 0, allow),  # 13
    ]
    filters = (_SockFilter * len(program))(*(_SockFilter(*line) for line in program))
    fprog = _SockFprog(len(program), filters)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def _hidden_git_config() -> None:
    """git stops with "unknown error" when the home folder's config exists but may not be read
    (under bubblewrap it is absent instead): point git at an empty one then."""
    if "GIT_CONFIG_GLOBAL" in os.environ:
        return
    home = os.environ.get("HOME", "")
    for name in (".gitconfig", ".config/git/config"):
        try:
            with open(os.path.join(home, name), "rb"):
                pass
        except PermissionError:
            os.environ["GIT_CONFIG_GLOBAL"] = os.devnull
            return
        except OSError:
            continue


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _reap_all() -> None:
    """Kill and reap every descendant (orphans come to this subreaper)."""
    me = os.getpid()
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                for child in _children(me):  # someone is left: kill it, then reap
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(child, signal.SIGKILL)
                os.waitpid(-1, 0)
        except ChildProcessError:
            return


def main(args: list[str]) -> int:
    split = args.index("--")
    abi, network, tmp, grants = int(args[0]), args[1] == "1", args[2], args[3:split]
    argv = args[split + 1 :]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    child = os.fork()
    if child == 0:
        try:
            _drop_capabilities(libc)
            _restrict(libc, abi, network, grants)
            if not network:
                _refuse_sockets(libc)
            os.environ["TMPDIR"] = tmp
            _hidden_git_config()
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"membrane sandbox (landlock): {exc}\n".encode())
        os._exit(126)

    def stop(_signum: int, _frame: object) -> None:
        _reap_all()
        os._exit(143)

    signal.signal(signal.SIGTERM, stop)
    _, status = os.waitpid(child, 0)
    _reap_all()
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell reports


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
