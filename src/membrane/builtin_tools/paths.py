"""Path resolution for the built-in tools: the checkout is the root of every relative path.

A child works in one checkout (``ToolContext.cwd``: the main checkout or its worktree). Every
path a built-in tool receives is resolved against that checkout, never against the process's own
working directory, so a child in a worktree cannot reach the main checkout by accident.

Reads stay home (DESIGN rule 14): :func:`ensure_readable` lets ``Read``, ``Glob`` and ``Grep``
read the checkout, the read roots the settings name and the system's folders, never
``$MEMBRANE_HOME`` nor the usual secret places (:mod:`membrane.sandbox.reads`), after symlinks
are resolved. Writes may not leave the checkout: :func:`resolve_for_write` resolves symlinks and
``..`` *before* checking containment, so neither ``../x`` nor a symlink inside the checkout that
points outside it can be used to write elsewhere.

Nor may writes reach the control paths inside the checkout
(:func:`~membrane.sandbox.paths.protected_part`): anything under a ``.git`` entry and anything
under the catalog roots at the checkout's top (``.membrane``, ``.agents``, ``.claude``,
``.opencode``, ``.pi``, ``.codex``), which Membrane itself reads and imports on its next load.
The one exception is the calling agent's own memory folder. The write itself goes by folder
handle without following links (:mod:`membrane.builtin_tools.beneath`), so a path swapped after
the check cannot move it.

This is capability shaping for a trusted agent, not a sandbox: a hostile process needs an OS,
container or VM boundary.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from membrane.builtin_tools._support import in_thread
from membrane.errors import PathOutsideCheckout, PathProtected, ToolArgumentsInvalid
from membrane.sandbox.boundary import find_git
from membrane.sandbox.paths import protected_message, protected_part, real_path
from membrane.sandbox.reads import ReadScope, read_scope
from membrane.tools.spec import ToolContext

__all__ = [
    "approved_scope",
    "checkout_root",
    "display_path",
    "ensure_inside",
    "ensure_readable",
    "is_inside",
    "protected_message",
    "protected_part",
    "read_scope_for",
    "real_path",
    "resolve_for_write",
    "resolve_path",
]


def checkout_root(context: ToolContext) -> Path:
    """The checkout a call works in: ``context.cwd``, else the process's working directory.

    The result is absolute and symlink-free, so containment checks compare real locations.
    """
    base = context.cwd if context.cwd is not None else Path.cwd()
    return real_path(Path(base).expanduser().absolute())


def resolve_path(raw: str, context: ToolContext, *, tool: str, argument: str = "file_path") -> Path:
    """``raw`` as an absolute path: ``~`` expanded, relative paths joined to the checkout.

    ``..`` is collapsed lexically; symlinks are left alone (reads may follow them anywhere).
    """
    if not raw or "\x00" in raw:
        raise ToolArgumentsInvalid(
            f"{tool}: `{argument}` must be a non-empty path without NUL bytes.",
            tool=tool,
            path=f"$.{argument}",
            reason="empty or NUL-containing path",
        )
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = checkout_root(context) / path
    return Path(os.path.normpath(path))


def read_scope_for(context: ToolContext, read_paths: Sequence[Path] = ()) -> ReadScope:
    """What a call in ``context`` may read: its checkout (and repository), ``read_paths`` and
    the system's folders, less the hidden places; only its checkout (less the hidden places)
    when ``context.checkout_reads_only``."""
    root = checkout_root(context)
    if context.checkout_reads_only:
        return read_scope(root, system=False)
    git = find_git(root)
    repository = () if git is None else (git.top, git.common)
    roots = (*read_paths, *context.read_paths)
    return read_scope(root, read_paths=roots, repository=repository)


def ensure_readable(path: Path, scope: ReadScope, *, tool: str, shown: str | None = None) -> Path:
    """The real location of ``path``; :class:`PathOutsideCheckout` (``path-outside-checkout``)
    when ``scope`` does not let a child read it."""
    real = real_path(path)
    if scope.allows_real(real):
        return real
    where = shown if shown is not None else str(path)
    via = "" if real == Path(os.path.normpath(path)) else f" (it resolves to {real})"
    if scope.roots == (scope.checkout,):
        rule = "This caller (the server's `external` role) reads only inside the checkout."
    else:
        rule = (
            "Reads stay in the checkout, the system's folders (/usr, /etc, ...) and the folders "
            "the settings' `read_paths` name; Membrane's state and secret places (~/.ssh, "
            "~/.aws, /etc/shadow, .env files outside the checkout, ...) are never read."
        )
    raise PathOutsideCheckout(
        f"{tool} refused to read {where}{via}: it is outside the checkout {scope.checkout} and "
        f"the read roots. {rule}",
        tool=tool,
        path=str(path),
        resolved=str(real),
        checkout=str(scope.checkout),
        operation="read",
    )


async def approved_scope(
    path: Path, scope: ReadScope, context: ToolContext, *, tool: str, shown: str | None = None
) -> ReadScope:
    """``scope`` when it lets a child read ``path``; else, when the context asks the host about
    reads outside the roots (``ToolContext.ask_read``: the settings' ``read_outside = "ask"``)
    and the host approves, ``scope`` with ``path`` as one more root (the hidden places inside
    it stay hidden). Otherwise :class:`PathOutsideCheckout`: ``$MEMBRANE_HOME`` is never asked
    about, nor a secret place unless a rule names that exact path."""
    try:
        await in_thread(lambda: ensure_readable(path, scope, tool=tool, shown=shown))
        return scope
    except PathOutsideCheckout:
        ask = context.ask_read
        real = real_path(path)
        if ask is None or real.is_relative_to(scope.state) or context.checkout_reads_only:
            raise
        if not await ask(tool, real, scope.secret(real), context):
            raise
    return scope.widened(real)


def is_inside(path: Path, root: Path) -> bool:
    """Whether the real location of ``path`` is ``root`` or below it (``root`` must be real)."""
    return real_path(path).is_relative_to(root)


def ensure_inside(path: Path, context: ToolContext, *, tool: str, shown: str | None = None) -> Path:
    """The real location of ``path``; :class:`PathOutsideCheckout` when outside the checkout,
    :class:`PathProtected` when inside one of its control folders (:func:`protected_part`).

    Symlinks in every existing component (the final one included, even when dangling) are
    followed before the check, so the returned path is where a write would really land.
    """
    root = checkout_root(context)
    real = real_path(path)
    if not real.is_relative_to(root):
        where = shown if shown is not None else str(path)
        via = "" if real == Path(os.path.normpath(path)) else f" (it resolves to {real})"
        raise PathOutsideCheckout(
            f"{tool} refused to modify {where}{via}: it is outside the checkout {root}. "
            "Mutating tools only change files inside the checkout.",
            tool=tool,
            path=str(path),
            resolved=str(real),
            checkout=str(root),
        )
    protected = protected_part(real, root, agent=context.agent)
    if protected is not None:
        where = shown if shown is not None else str(path)
        raise PathProtected(
            f"{tool} refused to modify {where}: {protected_message(protected, context.agent)}",
            tool=tool,
            path=str(path),
            resolved=str(real),
            checkout=str(root),
            protected=protected,
        )
    return real


def resolve_for_write(
    raw: str, context: ToolContext, *, tool: str, argument: str = "file_path"
) -> Path:
    """The real path a mutating tool may write for ``raw``, or :class:`PathOutsideCheckout`."""
    return ensure_inside(
        resolve_path(raw, context, tool=tool, argument=argument), context, tool=tool, shown=raw
    )


def display_path(path: Path, context: ToolContext) -> str:
    """``path`` relative to the checkout when it lies inside it, else absolute (for tool output)."""
    root = checkout_root(context)
    try:
        relative = path.relative_to(root)
    except ValueError:
        return str(path)
    return relative.as_posix() or "."
