"""The boundary one child's commands run under: what they may write, what stays read-only.

:func:`plan_boundary` works it out from the child's checkout:

* a child that may write (it holds ``Write`` or ``Edit``) may write its checkout, except the
  control paths (:mod:`membrane.sandbox.paths`) at the checkout's top, which stay read-only,
  and except its own memory folders, which it may write again;
* a read-only child may write nothing of its checkout;
* in a git worktree (a ``.git`` *file* at or above the checkout), a writing child's git may
  also write its own worktree's admin folder (``<common>/worktrees/<name>``: its ``HEAD``,
  index and logs) and the shared object store, so it can commit to its own detached ``HEAD``;
  the rest of the repository (every other branch and worktree, ``config``, ``hooks``,
  ``packed-refs``) stays read-only, and so do the two files that point the worktree somewhere
  else (``commondir``, ``gitdir``);
* every command gets a private, empty temporary folder, discarded when it ends; Membrane's
  own installation (the interpreter, its environment and the ``membrane`` package) and the
  files the host's command line for an agent process names (:func:`program_files`) stay
  visible, read-only, even when they lie under ``/tmp``, so the agent process, a child's
  ``membrane`` command and code mode's executor still start.

The boundary is data: the backends enforce it, ``explain`` shows it, the run's ``published``
event records it.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from membrane.json_types import JSONDict
from membrane.sandbox.executables import which
from membrane.sandbox.machine import Backend
from membrane.sandbox.paths import (
    CATALOG_FILES,
    CATALOG_ROOTS,
    GIT_ENTRY,
    MEMORY_PLACES,
    real_path,
)
from membrane.sandbox.reads import read_scope

__all__ = ["WRITING_TOOLS", "Boundary", "GitPlace", "find_git", "plan_boundary", "program_files"]

#: A child holding neither may write nothing of its checkout, whatever its commands do.
WRITING_TOOLS: frozenset[str] = frozenset({"Write", "Edit"})


@dataclass(frozen=True, slots=True)
class Boundary:
    """What a sandboxed command may write (all paths real and absolute).

    ``writable`` are trees it may write; ``read_only`` are carve-outs inside them that it may
    not (later entries of ``writable`` that lie inside a carve-out, such as the agent's memory
    folder inside ``.membrane``, are writable again: ``reopened``). ``create`` are control
    paths that do not exist yet: a backend that needs a mount point makes them as empty
    folders, so nothing can be planted there; ``watch`` are control *files* that do not exist
    yet (``opencode.json``): one a command creates is removed when it ends. ``visible`` are
    trees the command must see read-only even where a private temporary folder would hide them
    (the checkout, its repository). ``pinned`` are files that must hold what they held when the
    boundary was planned (a worktree's ``commondir`` and ``gitdir``, inside its writable admin
    folder): a backend that cannot hold them read-only (Landlock) has them put back when the
    command ends. ``readable`` are the trees a command may read besides ``visible`` (the
    system's, the read roots: :mod:`membrane.sandbox.reads`) and ``hidden`` the places inside
    them it must not see (``$MEMBRANE_HOME``, ``/etc/shadow``, ``~/.ssh``, ...).
    """

    backend: Backend
    checkout: Path
    writable: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    reopened: tuple[Path, ...] = ()
    create: tuple[Path, ...] = field(default=(), compare=False)
    watch: tuple[Path, ...] = field(default=(), compare=False)
    visible: tuple[Path, ...] = ()
    network: bool = False
    pinned: tuple[Path, ...] = field(default=(), compare=False)
    readable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()

    def to_json(self) -> JSONDict:
        """The boundary as ``explain`` and the ``published`` event show it."""
        confined = self.backend != "guard"
        return {
            "backend": self.backend,
            "confined": confined,
            "checkout": str(self.checkout),
            "writable": [str(p) for p in (*self.writable, *self.reopened)],
            "read_only": [str(p) for p in self.read_only],
            "readable": [str(p) for p in (*self.visible, *self.readable)] if confined else None,
            "hidden": [str(p) for p in self.hidden] if confined else [],
            "private_tmp": confined,
            "network": self.network or not confined,
        }


@dataclass(frozen=True, slots=True)
class GitPlace:
    """The repository a checkout lies in: its work tree's top, and, for a linked worktree, its
    admin folder (``<common>/worktrees/<name>``); ``common`` holds objects, refs and config."""

    top: Path
    common: Path
    admin: Path | None = None


def find_git(checkout: Path) -> GitPlace | None:
    """The repository ``checkout`` (real) lies in, or ``None`` (none, or one git cannot read)."""
    for folder in (checkout, *checkout.parents):
        entry = folder / GIT_ENTRY
        if entry.is_dir():
            return GitPlace(top=folder, common=real_path(entry))
        if not entry.is_file():
            continue
        try:
            text = entry.read_text(encoding="utf-8").strip()
            if not text.startswith("gitdir:"):
                return None
            admin = real_path(folder / text.removeprefix("gitdir:").strip())
            common_text = (admin / "commondir").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return GitPlace(top=folder, common=real_path(admin / common_text), admin=admin)
    return None


@functools.cache
def _installation() -> tuple[Path, ...]:
    """The folders Membrane runs from: the interpreter's environment and its base install, and
    the folder the ``membrane`` package is imported from (a source tree, for an editable
    install). Read-only to a command like the rest of the file system; listed so that a private
    ``/tmp`` does not hide them."""
    package = Path(__file__).resolve().parents[2]
    folders = (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, package)
    return tuple(dict.fromkeys(real_path(Path(f)) for f in folders if Path(f).is_dir()))


def program_files(argv: Sequence[str]) -> tuple[Path, ...]:
    """The files a host's command line names: its program (looked up on ``PATH``) and every
    argument that is an absolute path to an existing file. The host chose them, so they stay
    visible to the command where a private ``/tmp`` would hide them (a script under ``/tmp``)."""
    found: list[Path] = []
    program = which(argv[0]) if argv else None
    for part in (program, *argv[1:]):
        if part and os.path.isabs(part) and os.path.isfile(part):
            found.append(real_path(Path(part)))
    return tuple(dict.fromkeys(found))


def plan_boundary(
    backend: Backend,
    checkout: Path,
    *,
    agent: str | None = None,
    writes: bool = True,
    network: bool = False,
    reachable: Sequence[Path] = (),
    read_paths: Sequence[Path] = (),
) -> Boundary:
    """The boundary for a child working in ``checkout`` (made real here). ``reachable`` are
    folders and files the command must see read-only wherever they are (the runtime socket, so
    that a child's ``membrane`` command can call back even when the socket lies under ``/tmp``
    or ``$MEMBRANE_HOME``; the agent process's :func:`program_files`). ``read_paths``
    are the read roots the settings and the host name (:mod:`membrane.sandbox.reads`)."""
    root = real_path(checkout)
    git = find_git(root)
    repository = () if git is None else tuple(dict.fromkeys((git.top, git.common)))
    visible = tuple(dict.fromkeys((*repository, root)))
    extra = tuple(real_path(path) for path in reachable if path.exists())
    visible = tuple(dict.fromkeys((*visible, *extra, *_installation())))
    scope = read_scope(root, read_paths=read_paths, repository=repository)
    readable = [p for p in scope.visible_roots() if p not in visible and p.exists()]
    resolver = Path("/etc/resolv.conf")
    if network and resolver.exists() and not scope.allows(resolver):
        readable.append(real_path(resolver))  # a resolver file linked out of /etc (/run/...)
    reads = {"readable": tuple(readable), "hidden": scope.holes()}
    if not writes:
        return Boundary(backend=backend, checkout=root, visible=visible, network=network, **reads)
    read_only: list[Path] = []
    create: list[Path] = []
    watch: list[Path] = []
    for name in (GIT_ENTRY, *CATALOG_ROOTS):
        path = root / name
        target = real_path(path)
        if os.path.lexists(path) and target.exists():
            read_only.append(target)
        elif name in CATALOG_FILES:
            # A missing file cannot be held read-only without making it (an empty config file
            # would be read as a broken one): one the command creates is removed afterwards.
            watch.append(path)
        elif target.is_relative_to(root):
            # Missing (or a dangling link into the checkout): it must not be creatable.
            create.append(target)
            read_only.append(target)
    reopened = [
        root / top / folder / agent
        for top, folder in MEMORY_PLACES
        if agent and (root / top / folder / agent).is_dir()
    ]
    writable = [root]
    pinned: list[Path] = []
    if git is not None and git.admin is not None:
        writable += [git.admin, git.common / "objects"]
        pinned = [p for p in (git.admin / "commondir", git.admin / "gitdir") if p.is_file()]
        read_only += pinned
    return Boundary(
        backend=backend,
        checkout=root,
        writable=tuple(writable),
        read_only=tuple(dict.fromkeys(read_only)),
        reopened=tuple(p for p in reopened if real_path(p) == p),
        create=tuple(create),
        watch=tuple(watch),
        visible=visible,
        network=network,
        pinned=tuple(pinned),
        **reads,
    )
