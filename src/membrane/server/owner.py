"""The owner's proof: a secret in a file only the server's user can read.

The server makes ``$MEMBRANE_HOME/owner.token`` at start when it is absent (mode ``0600``,
created exclusively, never through a symlink) and keeps using the one it finds, so every
runtime of one Membrane home accepts the same proof. The user's own ``membrane`` commands read
it and present it in ``initialize`` (``identity.ownerToken``); a caller that presents it is the
owner. A child never has it: it is in no child's environment, and the sandbox hides
``$MEMBRANE_HOME`` from every sandboxed process (DESIGN rule 11). Where no OS sandbox is in
force (the shell guard alone) a child's commands run with the user's own file access and can
read it like any other file of the user.
"""

from __future__ import annotations

import errno
import hmac
import os
import secrets
import stat
from pathlib import Path
from typing import Final

from membrane.config.load import membrane_home
from membrane.errors import ServerError

__all__ = ["OWNER_FILE", "ensure_owner_token", "owner_token_path", "read_owner_token", "same"]

#: The file under ``$MEMBRANE_HOME`` that holds the owner's token.
OWNER_FILE: Final = "owner.token"
_BYTES: Final = 32


def owner_token_path(home: Path | None = None) -> Path:
    return (home if home is not None else membrane_home()) / OWNER_FILE


def ensure_owner_token(home: Path | None = None) -> str:
    """The owner's token, made now when ``$MEMBRANE_HOME/owner.token`` is absent.

    Raises ``ServerError`` when the file is not a regular file of this user that only this
    user may read (a symlink, another user's file, a group- or world-readable one)."""
    path = owner_token_path(home)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    token = secrets.token_urlsafe(_BYTES)
    # Written whole under a name of its own, then linked into place: two servers starting at
    # once never see each other's file before its token is in it (a link that exists fails).
    draft = path.with_name(f".{OWNER_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(token + "\n")
        os.link(draft, path)
    except FileExistsError:
        found = read_owner_token(home)
        if found is None:
            raise ServerError(
                f"{path} is not a private token file of this user (mode 0600, a regular file)",
                path=str(path),
                hint="remove it; the next `membrane serve` makes a new one",
            ) from None
        return found
    finally:
        draft.unlink(missing_ok=True)
    return token


def read_owner_token(home: Path | None = None) -> str | None:
    """The owner's token, or ``None`` when this process cannot prove it is the owner (no
    file, a file it cannot read, or one that is not private to this user)."""
    path = owner_token_path(home)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.EACCES, errno.ELOOP, errno.ENOTDIR, errno.EPERM):
            return None
        raise
    with os.fdopen(fd, encoding="ascii") as file:
        info = os.fstat(file.fileno())
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != os.getuid()
            or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
        ):
            return None
        token = file.read(256).strip()
    return token or None


def same(presented: object, token: str) -> bool:
    """Whether ``presented`` is the owner's ``token`` (compared in constant time)."""
    return isinstance(presented, str) and hmac.compare_digest(presented.encode(), token.encode())
