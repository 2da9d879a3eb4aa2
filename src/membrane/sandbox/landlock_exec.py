"""Run commands under Landlock rules, and kill what they leave behind (stdlib only).

Two ways in, one confinement:

* ``python -I -S landlock_exec.py ABI NETWORK TMP UID [w:TREE | f:FILE | r:TREE | d:DIR]...
  -- ARGV...`` runs one command (what a long-lived child, such as a command provider's agent
  or a Code Mode program, is started with);
* ``python -I -S landlock_exec.py --serve FD`` is the *spawn helper*: started once per Membrane
  process, it keeps *supervisors* forked ahead, each waiting on the socket ``FD`` for one
  request carrying the command's standard input, output and error and a socket of its own
  (``SCM_RIGHTS``), on which it reads the command (working folder, environment and the same
  arguments as above). No interpreter starts per command, and no fork lies on its path: the
  helper is single-threaded, so forking it is safe, and the supervisor confines itself and
  starts the command with ``posix_spawn``.

``ABI`` is the kernel's Landlock ABI version, ``NETWORK`` ``1`` when the network is allowed,
``TMP`` the private temporary folder, ``UID`` the uid the command runs as inside a user
namespace of its own when Membrane runs as root (``-``: none), then the trees (``w:``) and
single files (``f:``) that may be written (and read), the trees that may be read and executed
(``r:``) and the folders that may only be listed (``d:``). Nothing else may be read.

The process that runs a command becomes a *child subreaper* and confines the command (the
helper process in its forked child before ``exec``, a supervisor itself before
``posix_spawn``): it drops every capability (when it holds any, as it does when Membrane
runs as root: the bounding and ambient sets are emptied and root's privileges are locked off
with the securebits, so no later ``exec`` of any program, setuid or not, gives one back),
moves into a user and an IPC namespace of its own as ``UID`` (root only), sets
``no_new_privs``, calls ``landlock_restrict_self`` and installs a seccomp filter that refuses
``socket()`` for ``AF_UNIX`` (Landlock does not govern connecting to a Unix socket on the file
system), ``socketpair()`` of datagram sockets (which could be pointed at one),
``io_uring_setup`` (which can make sockets too) and, with the network off, ``socket()`` for
every other family. The command and everything it starts may write only
beneath ``w:`` trees and to ``f:`` files, may neither bind nor connect TCP unless ``NETWORK``,
and (ABI 6 and later) may not signal processes or reach abstract Unix sockets outside its own
domain. Every process the command leaves behind, including one that called ``setsid`` or
double-forked (orphans are re-parented to the subreaper), is killed when the command ends,
when the run is stopped (``SIGTERM`` to the one-shot helper; ``k`` or the end of its socket to
a supervisor) or when Membrane goes away.

It imports nothing from Membrane, and nothing slow from the standard library (no ``json``, no
``re``), so that it starts fast.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import socket
import sys

_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446
_PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER, _PR_SET_PDEATHSIG = 38, 36, 1
_PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 28, 47, 4
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
#: NOROOT, NO_SETUID_FIXUP, KEEP_CAPS and NO_CAP_AMBIENT_RAISE, each with its lock bit.
_SECUREBITS_LOCKED_DOWN = 0xEF
_CAP_VERSION_3 = 0x20080522
_CLONE_NEWUSER, _CLONE_NEWIPC = 0x10000000, 0x08000000
#: (audit arch, socket, socketpair, io_uring_setup) syscall numbers where the filter is known.
_SECCOMP_ARCHES = {
    "x86_64": (0xC000003E, 41, 53, 425),
    "aarch64": (0xC00000B7, 198, 199, 425),
}
_AF_UNIX, _SOCK_STREAM, _SOCK_SEQPACKET, _SOCK_TYPE_MASK = 1, 1, 5, 0xF
_EACCES, _EAFNOSUPPORT, _ENOSYS = 13, 97, 38
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
#: Signals an interpreter ignores (or a helper does) that a command must start with as default.
_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD)

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


def _own_user_namespace(libc: ctypes.CDLL, uid: int) -> bool:
    """Root only: move into a user namespace of its own, as ``uid`` inside (root outside, as
    under bubblewrap: the file system still sees root's files as its own), and an IPC namespace
    (root's System V IPC objects out of reach). ``False`` where user namespaces are refused
    (a container's seccomp profile, ``user.max_user_namespaces = 0``): it stays uid 0."""
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWIPC) != 0:
        return False
    for name, line in (("setgroups", "deny"), ("uid_map", f"{uid} 0 1"), ("gid_map", f"{uid} 0 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(line)
    return True


def _drop_privileges(libc: ctypes.CDLL, uid: int | None) -> None:
    """Drop every capability for good (nothing to do for a process that holds none), in a user
    namespace of its own as ``uid`` when one is given (Membrane runs as root)."""
    if uid is not None and os.geteuid() == 0:
        _own_user_namespace(libc, uid)
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


def _refuse_sockets(libc: ctypes.CDLL, network: bool) -> None:
    """``socket()`` fails for ``AF_UNIX`` (``EACCES``) and, unless ``network``, for every
    other family (``EAFNOSUPPORT``); ``socketpair()`` makes only stream and seqpacket pairs
    (a datagram one could be pointed at a socket outside: ``EACCES``); ``io_uring_setup``
    fails with ``ENOSYS``; x32 system calls likewise; a process of another architecture (32-bit
    code on a 64-bit kernel) is killed at its first call."""
    known = _SECCOMP_ARCHES.get(os.uname().machine)
    if known is None:
        raise OSError(_ENOSYS, f"no socket filter for {os.uname().machine}")
    arch, socket_nr, pair_nr, uring_nr = known
    ld, jeq, jge, alu_and, ret = 0x20, 0x15, 0x35, 0x54, 0x06
    allow, errno_base, kill = 0x7FFF0000, 0x00050000, 0x80000000
    others = allow if network else errno_base | _EAFNOSUPPORT
    program = [
        (ld, 0, 0, 4),  # 0: the architecture
        (jeq, 1, 0, arch),  # 1: native? go on : kill
        (ret, 0, 0, kill),  # 2
        (ld, 0, 0, 0),  # 3: the system call number
        (jge, 4, 0, 0x40000000),  # 4: x32 -> 9
        (jeq, 4, 0, socket_nr),  # 5: socket -> 10
        (jeq, 7, 0, pair_nr),  # 6: socketpair -> 14
        (jeq, 1, 0, uring_nr),  # 7: io_uring_setup -> 9
        (ret, 0, 0, allow),  # 8
        (ret, 0, 0, errno_base | _ENOSYS),  # 9
        (ld, 0, 0, 16),  # 10: socket's family (the low half of its first argument)
        (jeq, 1, 0, _AF_UNIX),  # 11: AF_UNIX -> 13
        (ret, 0, 0, others),  # 12
        (ret, 0, 0, errno_base | _EACCES),  # 13
        (ld, 0, 0, 24),  # 14: socketpair's type (the low half of its second argument)
        (alu_and, 0, 0, _SOCK_TYPE_MASK),  # 15: without SOCK_NONBLOCK and SOCK_CLOEXEC
        (jeq, 1, 0, _SOCK_STREAM),  # 16: stream -> 18
        (jeq, 0, 1, _SOCK_SEQPACKET),  # 17: seqpacket -> 18, else -> 19
        (ret, 0, 0, allow),  # 18
        (ret, 0, 0, errno_base | _EACCES),  # 19
    ]
    filters = (_SockFilter * len(program))(*(_SockFilter(*line) for line in program))
    fprog = _SockFprog(len(program), filters)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def _command_env(env: dict[str, str], tmp: str) -> dict[str, str]:
    """The command's environment, once it is confined: ``TMPDIR`` is its private folder; git
    gets an empty global config when the home folder's exists but may not be read (git stops
    with "unknown error" then; under bubblewrap it is absent instead)."""
    env = {**env, "TMPDIR": tmp}
    if "GIT_CONFIG_GLOBAL" not in env:
        home = env.get("HOME", "")
        for name in (".gitconfig", ".config/git/config"):
            try:
                with open(os.path.join(home, name), "rb"):
                    pass
            except PermissionError:
                env["GIT_CONFIG_GLOBAL"] = os.devnull
                break
            except OSError:
                continue
    return env


class _Plan:
    """One command's confinement, read from its arguments (see the module docstring)."""

    __slots__ = ("abi", "argv", "grants", "network", "tmp", "uid")

    def __init__(self, args: list[str]) -> None:
        split = args.index("--")
        self.abi, self.network, self.tmp = int(args[0]), args[1] == "1", args[2]
        self.uid = None if args[3] == "-" else int(args[3])
        self.grants, self.argv = args[4:split], args[split + 1 :]


def _confine(libc: ctypes.CDLL, plan: _Plan) -> None:
    """Confine this process (and what it starts) under ``plan``."""
    _drop_privileges(libc, plan.uid)
    _restrict(libc, plan.abi, plan.network, plan.grants)
    _refuse_sockets(libc, plan.network)


def _fail(exc: OSError) -> None:
    os.write(2, f"membrane sandbox (landlock): {exc}\n".encode())
    os._exit(126)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell reports


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
    """Run one command (the first way in) and return its exit code."""
    plan = _Plan(args)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    child = os.fork()
    if child == 0:
        try:
            _confine(libc, plan)
            # After the namespace switch, which clears it: the command dies with this process.
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            for number in _DEFAULT_SIGNALS:  # this interpreter ignores them; a command must not
                signal.signal(number, signal.SIG_DFL)
            os.execvpe(plan.argv[0], plan.argv, _command_env(dict(os.environ), plan.tmp))
        except OSError as exc:
            _fail(exc)

    def stop(_signum: int, _frame: object) -> None:
        _reap_all()
        os._exit(143)

    signal.signal(signal.SIGTERM, stop)
    _, status = os.waitpid(child, 0)
    _reap_all()
    return _exit_code(status)


def _read_request(call: int) -> tuple[str, dict[str, str], list[str]]:
    """``(cwd, env, args)`` from a supervisor's socket: a length (8 decimal digits), then that
    many bytes of NUL-separated fields: the working folder, the number of environment
    entries, the entries (``NAME=VALUE``), then the arguments."""
    data = b""
    size = None
    while size is None or len(data) < size + 8:
        chunk = os.read(call, 1 << 16)
        if not chunk:
            raise OSError(5, "the request ended early")
        data += chunk
        if size is None and len(data) >= 8:
            size = int(data[:8])
    fields = [os.fsdecode(f) for f in data[8 : 8 + size].split(b"\0")]
    count = int(fields[1])
    env = dict(entry.split("=", 1) for entry in fields[2 : 2 + count])
    return fields[0], env, fields[2 + count :]


def _supervise(libc: ctypes.CDLL, fds: list[int]) -> int:
    """Run one command (see the module docstring) with ``fds`` (stdin, stdout, stderr, the
    request socket, then descriptors the command keeps from 3 on): this process confines
    itself, starts the command with ``posix_spawn`` (no copy of this interpreter), reports
    ``exit N`` on the socket when it ends, and kills every process the command left
    behind; ``t`` on the socket sends ``SIGTERM`` to the command's process group, ``k`` or the
    socket's end kills everything."""
    import fcntl
    import select

    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    call = fds[3]
    # Descriptors come through SCM_RIGHTS inheritable: the command must not get this one (it
    # could report an exit of its own choosing).
    os.set_inheritable(call, False)
    # Moved out of the way, so that placing one descriptor never overwrites another.
    kept = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64) for fd in (*fds[:3], *fds[4:])]
    for fd in (*fds[:3], *fds[4:]):
        os.close(fd)
    cwd, env, args = _read_request(call)
    plan = _Plan(args)
    try:
        os.chdir(cwd)
        _confine(libc, plan)
        env = _command_env(env, plan.tmp)
        os.environ["PATH"] = env.get("PATH", os.defpath)  # where posix_spawnp looks
        actions = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(kept)]
        child = os.posix_spawnp(
            plan.argv[0], plan.argv, env, file_actions=actions, setsid=True,
            setsigdef=_DEFAULT_SIGNALS,
        )  # fmt: skip
    except OSError as exc:
        os.write(kept[2], f"membrane sandbox (landlock): {exc}\n".encode())
        os.write(call, b"exit 126\n")
        return 0
    for fd in kept:
        os.close(fd)
    waiting = os.pidfd_open(child)
    while True:
        ready, _, _ = select.select([waiting, call], [], [])
        if call in ready:
            order = os.read(call, 64)
            if not order or b"k" in order:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child, signal.SIGKILL)
                _reap_all()
                return 0
            if b"t" in order:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child, signal.SIGTERM)
        if waiting in ready:
            _, status = os.waitpid(child, 0)
            break
    _reap_all()
    with contextlib.suppress(OSError):
        os.write(call, f"exit {_exit_code(status)}\n".encode())
    return 0


def _spare(libc: ctypes.CDLL, channel: socket.socket, taken: int) -> int:
    """A supervisor made ahead of its request (so that no fork lies on a command's path): it
    takes the next request on ``channel``, tells the helper on ``taken`` so that another spare
    is made, and runs it; the channel's end (Membrane gone) ends it and the helper."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # A collection touches every object now, while the spare waits: the copy-on-write faults
    # of the fork are paid here, not between a request and its command (about 8 ms of the
    # confinement on a loaded two-core machine, 1.5 ms left).
    gc.collect()
    message, fds, _, _ = socket.recv_fds(channel, 16, 16)
    os.write(taken, b"t" if message else b"x")
    channel.close()
    os.close(taken)
    if not message or len(fds) < 4:
        for fd in fds:
            os.close(fd)
        return 0
    return _supervise(libc, fds)


def serve(control: int, *, spares: int = 2) -> int:
    """The spawn helper: keeps ``spares`` supervisors waiting on ``control`` and makes another
    each time one is taken, until Membrane's end of ``control`` closes."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors are reaped by the kernel
    libc = ctypes.CDLL(None, use_errno=True)
    channel = socket.socket(fileno=control)
    taken_r, taken_w = os.pipe()

    def fork_spare() -> None:
        if os.fork() == 0:
            code = 1
            try:
                os.close(taken_r)
                code = _spare(libc, channel, taken_w)
            except BaseException as exc:
                with contextlib.suppress(OSError):
                    os.write(2, f"membrane sandbox (landlock): {exc}\n".encode())
            finally:
                os._exit(code)

    for _ in range(spares):
        fork_spare()
    while True:
        notes = os.read(taken_r, 64)
        if not notes or b"x" in notes:
            return 0
        for _ in range(notes.count(b"t")):
            fork_spare()


def probe_user_namespace() -> int:
    """``0`` when this (root) process can take the user namespace a command would run in."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        return 0 if _own_user_namespace(libc, 65534) else 1
    except OSError:
        return 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        sys.exit(serve(int(sys.argv[2])))
    if sys.argv[1:2] == ["--probe-userns"]:
        sys.exit(probe_user_namespace())
    sys.exit(main(sys.argv[1:]))
