"""``CommandProvider``: a child is an external command-line agent, run as a child process.

The command is a template: a list of argv parts in which ``{task}`` (required) and ``{persona}``
(optional) are replaced, for example ``["claude", "-p", "{task}", "--append-system-prompt",
"{persona}"]``. Nothing goes through a shell. The process runs in its own process group, in the
child's checkout, with ``MEMBRANE_RUN_ID``, ``MEMBRANE_SESSION_ID`` and ``MEMBRANE_DEPTH`` set;
its standard output is the child's result, and a non-zero exit is an error carrying the end of
its standard error. Stopping the run (or the runtime) ends the whole process group: ``SIGTERM``,
then ``SIGKILL`` after ``kill_grace`` seconds.

Honest capabilities: the process is a separate program, so this provider cannot install an
in-process tool filter or count delegation depth inside it (``tool_filter=False``,
``depth_limit=False``: the ``"provider-managed"`` case). It advertises ``persona=True`` only
when the template has a ``{persona}`` slot. The child's definition still resolves (its prompt,
its checkout), but its tool selection is the external agent's own configuration.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import anyio
from anyio.abc import Process

from membrane.errors import InvalidRequest
from membrane.models.base import Message
from membrane.runtime.capabilities import (
    ChildOutcome,
    ChildSpec,
    SetupCallback,
    SubagentCapabilities,
)
from membrane.tools.scope import Scope

__all__ = ["CommandProvider"]

TASK_SLOT: Final = "{task}"
PERSONA_SLOT: Final = "{persona}"
#: Bytes of standard error kept for an error message.
_STDERR_TAIL = 4000


class CommandProvider:
    """Runs each child as ``command`` (a template; see the module docstring)."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        name: str = "command",
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        kill_grace: float = 5.0,
    ) -> None:
        self.command = _check_template(command)
        self.name = name
        self.env = dict(env or {})
        if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
            raise InvalidRequest(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.timeout = timeout
        self.kill_grace = kill_grace
        has_persona = any(PERSONA_SLOT in part for part in self.command)
        self.capabilities = SubagentCapabilities(
            persona=has_persona, tool_filter=False, depth_limit=False
        )

    async def create(self, request: ChildSpec, setup: SetupCallback) -> _CommandChild:
        scope = Scope(request.registry, name=f"agent:{request.run_id}")
        composition = setup(scope)
        persona = composition.persona or ""
        argv = [part.replace(TASK_SLOT, request.task) for part in self.command]
        argv = [part.replace(PERSONA_SLOT, persona) for part in argv]
        env = {
            **os.environ,
            **self.env,
            **request.env,
            "MEMBRANE_RUN_ID": request.run_id,
            "MEMBRANE_SESSION_ID": request.run_id,
            "MEMBRANE_DEPTH": str(request.depth),
        }
        return _CommandChild(self, scope, argv, env=env, cwd=request.cwd)


class _CommandChild:
    def __init__(
        self,
        provider: CommandProvider,
        scope: Scope,
        argv: list[str],
        *,
        env: dict[str, str],
        cwd: Path | None,
    ) -> None:
        self._provider = provider
        self._scope = scope
        self._argv = argv
        self._env = env
        self._cwd = cwd
        self._cancel: anyio.CancelScope | None = None
        self._stop_requested = False
        self.pid: int | None = None

    @property
    def scope(self) -> Scope:
        return self._scope

    def steer(self, message: str) -> bool:
        return False

    def messages(self) -> tuple[Message, ...]:
        return ()

    def stop(self) -> None:
        self._stop_requested = True
        if self._cancel is not None:
            self._cancel.cancel()

    async def run(self) -> ChildOutcome:
        if self._stop_requested:
            return ChildOutcome(status="stopped")
        try:
            process = await anyio.open_process(
                self._argv,
                cwd=self._cwd,
                env=self._env,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            return _error(f"cannot run {self._argv[0]!r}: {exc}", code="tool-failed")
        self.pid = process.pid
        try:
            with anyio.CancelScope() as cancel:
                self._cancel = cancel
                if self._stop_requested:
                    cancel.cancel()
                with anyio.fail_after(self._provider.timeout):
                    stdout, stderr = await _communicate(process)
                    code = await process.wait()
                return _outcome(self._argv[0], code, stdout, stderr)
            return ChildOutcome(status="stopped")
        except TimeoutError:
            return _error(
                f"{self._argv[0]!r} did not finish within {self._provider.timeout} s",
                code="run-error",
            )
        finally:
            self._cancel = None
            with anyio.CancelScope(shield=True):
                await _end_group(process, grace=self._provider.kill_grace)


async def _communicate(process: Process) -> tuple[bytes, bytes]:
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}

    async def drain(stream: object, key: str) -> None:
        if stream is None:
            return
        async for chunk in stream:  # type: ignore[attr-defined]
            chunks[key].append(chunk)

    async with anyio.create_task_group() as group:
        group.start_soon(drain, process.stdout, "out")
        group.start_soon(drain, process.stderr, "err")
    return b"".join(chunks["out"]), b"".join(chunks["err"])


def _outcome(program: str, code: int, stdout: bytes, stderr: bytes) -> ChildOutcome:
    text = stdout.decode("utf-8", errors="replace").strip()
    if code == 0:
        return ChildOutcome(status="completed", text=text, turns=1)
    tail = stderr.decode("utf-8", errors="replace").strip()[-_STDERR_TAIL:]
    return _error(
        f"{program!r} exited with status {code}" + (f": {tail}" if tail else ""),
        code="run-error",
        text=text,
        exit_code=code,
    )


def _error(
    message: str, *, code: str, text: str = "", exit_code: int | None = None
) -> ChildOutcome:
    error: dict[str, object] = {"code": code, "message": message, "data": {"exit_code": exit_code}}
    return ChildOutcome(status="error", text=text, error=error)


async def _end_group(process: Process, *, grace: float) -> None:
    """End the process and everything it started (its process group)."""
    if process.returncode is None:
        _signal_group(process.pid, signal.SIGTERM)
        with anyio.move_on_after(grace):
            await process.wait()
    _signal_group(process.pid, signal.SIGKILL)
    if process.returncode is None:
        await process.wait()
    await process.aclose()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _check_template(command: object) -> tuple[str, ...]:
    if isinstance(command, str) or not isinstance(command, Sequence) or not command:
        raise InvalidRequest(
            "command must be a non-empty list of argv parts, e.g. ['agent-cli', '-p', '{task}']; "
            f"got {command!r}",
            field="command",
        )
    parts = tuple(command)
    for part in parts:
        if not isinstance(part, str):
            raise InvalidRequest(
                f"every argv part of command must be a string, got {part!r}", field="command"
            )
    if not any(TASK_SLOT in part for part in parts):
        raise InvalidRequest(
            f"command {list(parts)!r} has no {TASK_SLOT} slot; the task must reach the agent",
            field="command",
        )
    if not parts[0] or TASK_SLOT in parts[0] or PERSONA_SLOT in parts[0]:
        raise InvalidRequest(
            f"command's first part must name the program, got {parts[0]!r}", field="command"
        )
    return parts
