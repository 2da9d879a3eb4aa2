"""The socket: where it lives, who may bind it, who may connect, and how frames are read.

* The path is ``$MEMBRANE_SOCKET``, else ``<membrane home>/sock/membrane.sock``. Its folder is
  created with mode 0700 and must be private (a folder others can enter is refused); the
  socket itself is mode 0600.
* A path longer than a Unix socket address holds (107 bytes; a deep ``MEMBRANE_HOME`` reaches
  it) is bound and connected through its folder's descriptor, ``/proc/self/fd/N/NAME``, which
  the kernel resolves to the same file: no link or file is made anywhere else, so the socket
  stays in its private folder. Where that cannot work either (no ``/proc``, or a file name
  that alone is too long) it fails with ``socket-path-too-long`` naming the path and the limit.
* A lock file beside the socket (``membrane.sock.lock``, ``flock``) holds the pid of the one
  server that owns it. A second server finds the lock taken and fails with
  ``runtime-already-running`` naming that pid. A socket file left by a crash (the lock is free
  and a connect is refused) is removed before binding; a socket that answers is never removed.
* Each connection's peer uid is read from the kernel (``SO_PEERCRED``); a peer that is not the
  server's own user, nor a uid the global settings' ``[peer_roles]`` name, is refused before a
  byte is read.
* The uids ``[peer_roles]`` names, and no one else, are let in by a POSIX ACL: search on the
  socket's folder and read-write on the socket (``grant_peers``). The folder and socket modes
  stay 0700 and 0600 for everyone else; an ACL left on the folder by an earlier start is
  dropped before the folder is checked, and made again for the uids named now.
* Frames are read with a bounded buffer: a line longer than ``MAX_FRAME_BYTES`` ends the
  connection after an error frame, and a peer that stalls mid-line holds only its own task.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import struct
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from membrane.config.load import membrane_home
from membrane.errors import RuntimeAlreadyRunning, ServerError
from membrane.runtime.environment import SOCKET_PATH_LIMIT, socket_address

__all__ = [
    "SOCKET_PATH_LIMIT",
    "PeerCredentials",
    "SocketLock",
    "bind_socket",
    "default_socket_path",
    "grant_peers",
    "listen_backlog",
    "peer_credentials",
    "probe_socket",
    "socket_address",
    "unlink_own_socket",
]

SOCKET_ENV: Final = "MEMBRANE_SOCKET"
_BACKLOG: Final = 512
_CRED = struct.Struct("3i")
#: A POSIX ACL as Linux stores it in ``system.posix_acl_access``: a version, then entries of
#: (tag, permissions, id), sorted by tag and id.
_ACL_XATTR: Final = "system.posix_acl_access"
_ACL_VERSION = struct.Struct("<I")
_ACL_ENTRY = struct.Struct("<HHI")
_ACL_USER_OBJ, _ACL_USER, _ACL_GROUP_OBJ, _ACL_MASK, _ACL_OTHER = 0x01, 0x02, 0x04, 0x10, 0x20
_ACL_NO_ID: Final = 0xFFFFFFFF
# The loser of a race for the lock reads the winner's pid for up to about half a second.
_HOLDER_READS: Final = 50
_HOLDER_PAUSE: Final = 0.01


def listen_backlog() -> int:
    """How many connections the kernel queues on the socket before a connect waits: the
    backlog ``bind_socket`` asks for, capped by ``net.core.somaxconn`` where Linux has one."""
    try:
        cap = int(Path("/proc/sys/net/core/somaxconn").read_text(encoding="ascii"))
    except (OSError, ValueError):
        return _BACKLOG
    return min(_BACKLOG, cap) if cap > 0 else _BACKLOG


def default_socket_path() -> Path:
    """``$MEMBRANE_SOCKET`` when set, else ``<membrane home>/sock/membrane.sock``."""
    value = os.environ.get(SOCKET_ENV, "").strip()
    if value:
        return Path(value).expanduser().absolute()
    return (membrane_home() / "sock" / "membrane.sock").absolute()


@dataclass(frozen=True, slots=True)
class PeerCredentials:
    pid: int
    uid: int
    gid: int


def peer_credentials(sock: socket.socket) -> PeerCredentials:
    """The connected peer's pid, uid and gid as the kernel recorded them at ``connect``."""
    pid, uid, gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return PeerCredentials(pid=pid, uid=uid, gid=gid)


def probe_socket(path: Path) -> bool:
    """Whether something accepts connections on ``path`` now."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(2.0)
        with socket_address(path) as address:
            probe.connect(address)
    except OSError:
        return False
    finally:
        probe.close()
    return True


class SocketLock:
    """The lock beside a socket: held by exactly one server process, recording its pid."""

    def __init__(self, socket_path: Path) -> None:
        self.path = socket_path.with_name(socket_path.name + ".lock")
        self._fd: int | None = None

    def acquire(self, *, socket_path: Path) -> None:
        """Take the lock, or raise ``RuntimeAlreadyRunning`` naming its holder's pid."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise ServerError(f"cannot lock {self.path}: {exc}", path=str(self.path)) from exc
            pid = self._holder_once_written()
            who = f"pid {pid}" if pid is not None else "another process"
            raise RuntimeAlreadyRunning(
                f"a runtime ({who}) already serves {socket_path}; use it, or stop it first",
                pid=pid,
                socket=str(socket_path),
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def holder(self) -> int | None:
        """The pid written in the lock file, if any (the winner writes it right after locking)."""
        try:
            text = self.path.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError):
            return None
        # Only a whole line counts: the winner may be between truncating and writing.
        pid = text.removesuffix("\n")
        return int(pid) if text.endswith("\n") and pid.isdigit() else None

    def _holder_once_written(self) -> int | None:
        """The holder's pid, waiting briefly: the winner writes it only just after locking."""
        for _ in range(_HOLDER_READS):
            pid = self.holder()
            if pid is not None:
                return pid
            time.sleep(_HOLDER_PAUSE)
        return None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _acl(owner: int, uids: Collection[int], granted: int) -> bytes:
    """An access ACL: ``owner`` permissions for the file's owner, ``granted`` for each of
    ``uids``, nothing for its group or anyone else."""
    entries = [(_ACL_USER_OBJ, owner, _ACL_NO_ID)]
    entries += [(_ACL_USER, granted, uid) for uid in sorted(set(uids))]
    entries += [(_ACL_GROUP_OBJ, 0, _ACL_NO_ID), (_ACL_MASK, granted, _ACL_NO_ID)]
    entries.append((_ACL_OTHER, 0, _ACL_NO_ID))
    return _ACL_VERSION.pack(2) + b"".join(_ACL_ENTRY.pack(*entry) for entry in entries)


def grant_peers(socket_path: Path, uids: Collection[int]) -> None:
    """Let exactly ``uids`` reach the socket: search (``x``) on its folder, read and write on
    the socket itself, by POSIX ACLs. ``ServerError`` where the file system keeps none."""
    if not uids:
        return
    try:
        os.setxattr(socket_path.parent, _ACL_XATTR, _acl(0o7, uids, 0o1))
        os.setxattr(socket_path, _ACL_XATTR, _acl(0o6, uids, 0o6))
    except OSError as exc:
        raise ServerError(
            f"cannot let the uids of [peer_roles] ({', '.join(map(str, sorted(uids)))}) reach "
            f"{socket_path}: the file system keeps no POSIX ACL there ({exc.strerror})",
            path=str(socket_path),
            hint="point MEMBRANE_SOCKET at a file system with ACLs, or remove [peer_roles]",
        ) from exc


def _drop_own_acl(folder: Path) -> None:
    """Remove an ACL from ``folder`` (yours) and make it 0700 again: what an earlier start
    granted is granted anew for the uids named now, never kept."""
    if folder.stat().st_uid != os.getuid():
        return
    try:
        os.removexattr(folder, _ACL_XATTR)
    except OSError:
        return  # none there (or none possible): nothing was granted
    os.chmod(folder, 0o700)


def _private_folder(folder: Path) -> None:
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700, parents=True)
    _drop_own_acl(folder)
    info = folder.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise ServerError(f"{folder} is not a folder; the socket needs one", path=str(folder))
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ServerError(
            f"the socket folder {folder} is mode {stat.S_IMODE(info.st_mode):04o} owned by uid "
            f"{info.st_uid}; it must be yours with mode 0700, so nobody else can reach the socket",
            path=str(folder),
            hint=f"chmod 700 {folder}, or point MEMBRANE_SOCKET into a private folder",
        )


def bind_socket(path: Path, lock: SocketLock, *, peers: Collection[int] = ()) -> socket.socket:
    """The listening socket at ``path`` (0600, in a private 0700 folder, reachable by the uids
    ``peers`` besides its owner), with ``lock`` held.

    Raises ``RuntimeAlreadyRunning`` when another server holds the lock or the socket answers,
    ``ServerError`` when the folder is not private or something else occupies the path.
    """
    _private_folder(path.parent)
    lock.acquire(socket_path=path)
    try:
        if path.exists() or path.is_symlink():
            if not stat.S_ISSOCK(path.lstat().st_mode):
                raise ServerError(
                    f"{path} exists and is not a socket; it is left alone", path=str(path)
                )
            if probe_socket(path):
                # A live socket whose server holds no lock: never removed.
                raise RuntimeAlreadyRunning(
                    f"a runtime already answers on {path}; use it, or stop it first",
                    pid=None,
                    socket=str(path),
                )
            path.unlink()  # left by a crash: the lock is ours and nobody answers
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            old = os.umask(0o177)
            try:
                with socket_address(path) as address:
                    sock.bind(address)
            finally:
                os.umask(old)
            os.chmod(path, 0o600)
            grant_peers(path, peers)
            sock.listen(_BACKLOG)
        except BaseException:
            sock.close()
            raise
    except BaseException:
        lock.release()
        raise
    return sock


def unlink_own_socket(path: Path, inode: int) -> None:
    """Remove ``path`` if it is still the socket file this server bound (inode ``inode``)."""
    with contextlib.suppress(OSError):
        info = path.lstat()
        if stat.S_ISSOCK(info.st_mode) and info.st_ino == inode:
            path.unlink()
