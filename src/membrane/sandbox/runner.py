"""``Sandbox``: run a command under one child's boundary, with the backend the settings choose.

One object serves every caller that runs a child's commands (the ``Bash`` tool, Code Mode, a
command provider)::

    sandbox = Sandbox.for_checkout(SandboxPolicy.from_settings(settings), checkout,
                                   agent="coder", writes=True)
    outcome = await sandbox.run(["bash", "-c", "make test"], timeout=120)

``policy`` says which backend (``auto``: the strongest this machine offers) and whether the
network is allowed; ``checkout`` is the child's working folder; ``writes`` is whether the child
may change its checkout at all (a child without ``Write`` and ``Edit`` may write only its
private temporary folder); ``agent`` names the memory folders it may write. The policy and
the boundary it plans (``boundary_summary``) are :mod:`membrane.sandbox.policy`'s, which plans
without importing the backends' command lines or this runner.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from membrane.errors import HardLinkRefused, SandboxUnavailable
from membrane.limits import MAX_TOOL_OUTPUT_BYTES
from membrane.sandbox.boundary import Boundary
from membrane.sandbox.bubblewrap import bwrap_argv
from membrane.sandbox.landlock import landlock_argv
from membrane.sandbox.links import outside_links
from membrane.sandbox.machine import Backend, MachineSupport, machine_support

# The policy and the planning (all ``explain`` needs) are imported from here too, as before.
from membrane.sandbox.policy import SandboxPolicy, boundary_summary, plan_for

if TYPE_CHECKING:
    from membrane.sandbox.process import ProcessOutcome

__all__ = ["Sandbox", "SandboxPolicy", "boundary_summary"]


class Sandbox:
    """Runs commands under ``boundary`` (see :func:`plan_boundary`)."""

    __slots__ = ("_boundary", "_pinned", "_socket", "_support")

    def __init__(
        self,
        boundary: Boundary,
        *,
        support: MachineSupport | None = None,
        runtime_socket: Path | None = None,
    ) -> None:
        self._boundary = boundary
        self._support = support if support is not None else machine_support()
        self._socket = runtime_socket
        self._pinned: dict[Path, bytes] = {}
        for path in boundary.pinned:
            with contextlib.suppress(OSError):
                self._pinned[path] = path.read_bytes()

    @classmethod
    def for_checkout(
        cls,
        policy: SandboxPolicy,
        checkout: Path,
        *,
        agent: str | None = None,
        writes: bool = True,
        support: MachineSupport | None = None,
        reachable: Sequence[Path] = (),
        runtime_socket: Path | None = None,
    ) -> Sandbox:
        """The sandbox for a child in ``checkout``; :class:`SandboxUnavailable` when the policy
        names a backend this machine lacks. ``reachable``: see ``plan_boundary``;
        ``runtime_socket``: the socket the child's ``membrane`` commands call back on (shown
        read-only under bubblewrap, reached through a connector under Landlock:
        :meth:`callback`)."""
        found = support if support is not None else machine_support()
        shown = (*reachable, runtime_socket) if runtime_socket is not None else reachable
        boundary = plan_for(
            policy, checkout, support=found, agent=agent, writes=writes, reachable=shown
        )
        return cls(boundary, support=found, runtime_socket=runtime_socket)

    @property
    def backend(self) -> Backend:
        return self._boundary.backend

    @property
    def boundary(self) -> Boundary:
        return self._boundary

    def command(self, argv: Sequence[str], *, cwd: Path, tmp: Path | None = None) -> list[str]:
        """``argv`` as it is started: wrapped by the backend (unchanged for ``guard``).

        The Landlock backend needs ``tmp``, the call's private temporary folder (bubblewrap
        mounts its own)."""
        boundary = self._boundary
        if boundary.backend == "bubblewrap":
            assert self._support.bwrap is not None
            return bwrap_argv(
                self._support.bwrap,
                boundary,
                argv,
                cwd=cwd,
                root=self._support.root,
                userns_lock=self._support.bwrap_userns_lock,
            )
        if boundary.backend == "landlock":
            if tmp is None:
                raise SandboxUnavailable(
                    "the Landlock sandbox needs a private temporary folder",
                    backend="landlock",
                    reason="no temporary folder",
                )
            return landlock_argv(boundary, argv, tmp=tmp, root=self._support.root)
        return list(argv)

    @contextlib.asynccontextmanager
    async def callback(
        self, env: Mapping[str, str] | None, *, fd: int | None = None
    ) -> AsyncIterator[tuple[tuple[int, ...], dict[str, str] | None]]:
        """``(descriptors to keep open in the command, its environment)`` so that its
        ``membrane`` commands reach the runtime socket: under Landlock, which refuses the
        command any Unix socket of its own, a connector (:mod:`membrane.sandbox.connector`)
        served while the block runs, as ``$MEMBRANE_SOCKET_FD`` (``fd``: the number it has in
        the command, default its number here); elsewhere nothing to keep and ``env`` as given
        (the socket is reached by its path)."""
        if self.backend != "landlock" or self._socket is None:
            yield (), None if env is None else dict(env)
            return
        import anyio

        from membrane.sandbox.connector import SOCKET_FD_ENV, connector_pair, serve_connector

        mine, theirs = connector_pair()
        with theirs:
            number = theirs.fileno() if fd is None else fd
            changed = {**(os.environ if env is None else env), SOCKET_FD_ENV: str(number)}
            async with anyio.create_task_group() as group:
                group.start_soon(serve_connector, mine, self._socket)
                try:
                    yield (theirs.fileno(),), changed
                finally:
                    group.cancel_scope.cancel()

    def refuse_outside_links(self) -> None:
        """:class:`HardLinkRefused` when a file the command may write has a name outside what
        it may write (:mod:`membrane.sandbox.links`): writing through the name inside would
        change the file there, under every backend. Nothing to look at for a command that
        writes nothing. Blocking: call it in a worker thread."""
        found = outside_links(self._boundary)
        if not found:
            return
        first = found[0]
        names = ", ".join(str(link.path) for link in found)
        what = "is a hard link" if len(found) == 1 else "are hard links"
        raise HardLinkRefused(
            f"the command was not run: {names} {what} to a file with a name outside what "
            f"the command may write ({first.path} has "
            f"{first.links} names, {first.inside} of them there), so a write through it would "
            "change that file too. Replace the link with a copy (`cp --remove-destination` or "
            "re-create the file), or give this checkout to a child that does not write.",
            path=str(first.path),
            links=first.links,
            inside=first.inside,
            found=[str(link.path) for link in found],
        )

    def prepare(self) -> None:
        """Make the missing control paths as empty folders, so a backend can hold them
        read-only (a folder that does not exist could be created and planted)."""
        if self._boundary.backend != "bubblewrap":
            return
        for path in self._boundary.create:
            try:
                os.makedirs(path, mode=0o755, exist_ok=True)
            except OSError as exc:
                raise SandboxUnavailable(
                    f"the sandbox cannot hold {path} read-only: {exc.strerror or exc}",
                    backend=self.backend,
                    reason=str(exc),
                ) from exc

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        cwd: Path | None = None,
        max_output: int = MAX_TOOL_OUTPUT_BYTES,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ProcessOutcome:
        """Run ``argv`` in ``cwd`` (default: the checkout) under the boundary; ``stdin``: what
        it reads on its standard input (``None``: nothing).

        Raises ``OSError`` when the process cannot start and :class:`SandboxUnavailable`
        when the boundary cannot be set up.
        """
        # Imported here: planning and explaining a boundary need no process machinery (anyio).
        from membrane.sandbox.process import run_process

        where = cwd if cwd is not None else self._boundary.checkout
        if self._boundary.writable:
            import anyio.to_thread

            await anyio.to_thread.run_sync(self.refuse_outside_links)
        self.prepare()
        try:
            if self.backend != "landlock":
                outcome = await run_process(
                    self.command(argv, cwd=where), cwd=where, timeout=timeout,
                    max_output=max_output, env=env, stdin=stdin,
                )  # fmt: skip
            else:
                outcome = await self._run_landlocked(
                    argv, cwd=where, timeout=timeout, max_output=max_output, env=env, stdin=stdin
                )
        finally:
            removed = self.remove_planted()
        if not removed:
            return outcome
        import dataclasses  # the outcome is a dataclass of the process runner, imported above

        return dataclasses.replace(outcome, removed=removed)

    async def _run_landlocked(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        timeout: float,
        max_output: int,
        env: Mapping[str, str] | None,
        stdin: bytes | None,
    ) -> ProcessOutcome:
        """One command under Landlock, started by the spawn helper (no interpreter per call),
        in a private temporary folder made for it (owned by the command's uid)."""
        import tempfile

        from membrane.sandbox.landlock import landlock_args
        from membrane.sandbox.landlock_spawn import run_confined

        with tempfile.TemporaryDirectory(prefix="membrane-sandbox-") as tmp:
            args = landlock_args(self._boundary, argv, tmp=Path(tmp), root=self._support.root)
            async with self.callback(env, fd=3) as (keep, changed):
                return await run_confined(
                    args,
                    cwd=cwd,
                    env=os.environ if changed is None else changed,
                    timeout=timeout,
                    max_output=max_output,
                    stdin=stdin,
                    keep=keep,
                )

    def remove_planted(self) -> tuple[str, ...]:
        """Remove the control files (``watch``) that appeared during a command, and put back
        the ``pinned`` files it changed (a worktree's ``commondir`` under Landlock); the paths
        of both."""
        if self._boundary.backend == "guard":
            return ()
        removed = []
        for path in self._boundary.watch:
            if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
                with contextlib.suppress(OSError):
                    os.unlink(path)
                    removed.append(str(path))
        for path, held in self._pinned.items():
            if not os.path.islink(path) and os.path.isfile(path):
                with contextlib.suppress(OSError):
                    if path.read_bytes() == held:
                        continue
            with contextlib.suppress(OSError):
                if os.path.isdir(path) and not os.path.islink(path):
                    import shutil  # only after a command replaced the file with a folder

                    shutil.rmtree(path)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
                with open(path, "xb") as handle:
                    handle.write(held)
                removed.append(str(path))
        return tuple(removed)
