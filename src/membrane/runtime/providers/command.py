"""``CommandProvider``: a child is an external command-line agent, run as a child process.

The command is a template: a list of argv parts in which the slots ``{task}`` (required),
``{persona}`` and ``{guidance}`` (optional) are replaced, for example ``["coder", "--print",
"{guidance}\n\n{task}", "--system-prompt", "{persona}"]`` for a headless coding-agent CLI.
``{guidance}`` is the same text about reaching Membrane from a shell that a child with ``Bash``
finds in its system prompt (``membrane.resolve.guidance``). Each part is filled in one
pass, so a task that itself contains ``{persona}`` reaches the agent as written. Nothing goes
through a shell.

The process runs inside the OS sandbox (``sandbox``, a ``SandboxPolicy``; by default the
strongest backend this machine offers, network off): it may write its checkout except the
control paths, and a private temporary folder; under bubblewrap nothing it starts outlives it.
``SandboxPolicy("guard")`` runs it with the Membrane process's own permissions instead.
It runs in its own process group, in the child's checkout, with ``MEMBRANE_RUN_ID``,
``MEMBRANE_SESSION_ID``, ``MEMBRANE_DEPTH``, ``MEMBRANE_CLI_PATH`` and (when skills were
discovered) ``MEMBRANE_AGENT_SKILLS_DIRS`` set. Its standard output is the child's result,
kept up to ``max_output_bytes`` (the first and last halves; the text says how much was left out
in between); a non-zero exit is an error carrying the end of its standard error. The run ends
when the command exits: anything it left running in its process group is killed then, and
output still in the pipes is read for at most ``DRAIN_SECONDS``, so a descendant that holds the
output open cannot keep the run alive. Stopping the run (or the runtime) ends the whole process
group: ``SIGTERM``, then ``SIGKILL`` after ``kill_grace`` seconds.

Honest capabilities: the process is a separate program, so this provider cannot install an
in-process tool filter, count delegation depth inside it or check a structured answer
(``tool_filter``, ``depth_limit`` and ``structured_output`` are ``False``; the depth case is
``"provider-managed"``). It advertises ``persona=True`` only when the template has a
``{persona}`` slot. The child's definition still resolves as for any child (its checkout, its
effective persona), but of the resolved system prompt only the persona reaches the command,
through ``{persona}``: the definition's body and the environment section are not passed, as the
external agent builds its own prompt, and its tool selection is its own configuration. Steering
and runtime notices are not supported (``steer()`` and ``notify()`` return ``False``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import anyio
from anyio.abc import Process

from membrane.errors import InvalidRequest
from membrane.resolve.guidance import cli_guidance
from membrane.runtime.provider import (
    ChildOutcome,
    ChildSpec,
    SetupCallback,
    SubagentCapabilities,
)
from membrane.runtime.providers.external import ExternalChild, check_timeout, error_outcome
from membrane.sandbox.boundary import program_files
from membrane.sandbox.process import OutputCapture, pump, signal_group
from membrane.sandbox.runner import Sandbox, SandboxPolicy
from membrane.tools.scope import Scope

__all__ = ["CommandProvider"]

TASK_SLOT: Final = "{task}"
PERSONA_SLOT: Final = "{persona}"
GUIDANCE_SLOT: Final = "{guidance}"
_SLOTS: Final = re.compile(r"\{(task|persona|guidance)\}")
#: Bytes of standard output kept by default (the first and the last halves).
DEFAULT_MAX_OUTPUT_BYTES: Final = 200_000
#: How long, once the command has exited, its pipes may take to deliver what is left.
DRAIN_SECONDS: Final = 2.0
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
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        sandbox: SandboxPolicy | None = None,
    ) -> None:
        self.command = _check_template(command)
        self.sandbox = sandbox if sandbox is not None else SandboxPolicy()
        self.name = name
        self.env = dict(env or {})
        self.timeout = check_timeout(timeout)
        self.kill_grace = kill_grace
        if (
            isinstance(max_output_bytes, bool)
            or not isinstance(max_output_bytes, int)
            or max_output_bytes < 2
        ):
            raise InvalidRequest(
                f"max_output_bytes must be an integer >= 2 (bytes of output kept), got "
                f"{max_output_bytes!r}",
                field="max_output_bytes",
            )
        self.max_output_bytes = max_output_bytes
        has_persona = any(PERSONA_SLOT in part for part in self.command)
        self.capabilities = SubagentCapabilities(
            persona=has_persona, tool_filter=False, depth_limit=False, structured_output=False
        )

    async def create(self, request: ChildSpec, setup: SetupCallback) -> _CommandChild:
        scope = Scope(request.registry, name=f"agent:{request.run_id}")
        composition = setup(scope)
        values = {
            "task": request.task,
            "persona": composition.persona or "",
            "guidance": cli_guidance(),
        }
        argv = [_SLOTS.sub(lambda slot: values[slot.group(1)], part) for part in self.command]
        env = {
            **os.environ,
            **self.env,
            **request.env,
            "MEMBRANE_RUN_ID": request.run_id,
            "MEMBRANE_SESSION_ID": request.run_id,
            "MEMBRANE_DEPTH": str(request.depth),
        }
        sandbox = _sandbox(self.sandbox, request, env, program_files(self.command))
        # A hard link to a file elsewhere refuses the child at its start (hard-link-refused).
        await anyio.to_thread.run_sync(sandbox.refuse_outside_links)
        return _CommandChild(self, scope, argv, env=env, cwd=request.cwd, sandbox=sandbox)


def _sandbox(
    policy: SandboxPolicy, request: ChildSpec, env: Mapping[str, str], program: Sequence[Path]
) -> Sandbox:
    """The OS sandbox ``policy`` chooses for a child that may write its checkout (the command
    is an agent that edits files), its missing control paths made; ``SandboxUnavailable``
    when the policy names a backend this machine lacks. The command's ``program`` files and
    the runtime socket stay reachable, so it starts and its own ``membrane`` calls
    get back."""
    checkout = Path(request.cwd) if request.cwd is not None else Path.cwd()
    socket = env.get("MEMBRANE_SOCKET")
    sandbox = Sandbox.for_checkout(
        policy.for_agent(network=None if request.network else False, read_paths=request.read_paths),
        checkout,
        agent=request.agent,
        writes=True,
        reachable=program,
        runtime_socket=Path(socket) if socket else None,
    )
    sandbox.prepare()
    return sandbox


class _CommandChild(ExternalChild):
    def __init__(
        self,
        provider: CommandProvider,
        scope: Scope,
        argv: list[str],
        *,
        env: dict[str, str],
        cwd: Path | None,
        sandbox: Sandbox,
    ) -> None:
        super().__init__(scope, sandbox)
        self._provider = provider
        self._argv = argv
        self._env = env
        self._cwd = cwd
        self._process: Process | None = None

    def discard(self) -> None:
        """Never start the command; a process already started loses its whole group now."""
        self.stop()
        process = self._process
        if process is not None and process.returncode is None:
            signal_group(process.pid, signal.SIGKILL)

    async def run(self) -> ChildOutcome:
        if self._stopped:
            return ChildOutcome(status="stopped")
        with self.sandboxed("membrane-command-") as tmp:
            # Under Landlock the command reaches the runtime socket through a connector.
            async with self._sandbox.callback(self._env) as (keep, env):
                return await self._run(tmp, keep=keep, env=env)

    async def _run(
        self, tmp: Path | None, *, keep: Sequence[int], env: dict[str, str] | None
    ) -> ChildOutcome:
        provider = self._provider
        checkout = self._cwd if self._cwd is not None else Path.cwd()
        argv = self._sandbox.command(self._argv, cwd=checkout, tmp=tmp)
        try:
            process = await anyio.open_process(
                argv,
                cwd=self._cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=keep,
            )
        except OSError as exc:
            return error_outcome(
                f"cannot run {self._argv[0]!r}: {exc}",
                code="tool-failed",
                data={"exit_code": None},
            )
        self._process, self.pid = process, process.pid
        out = OutputCapture(provider.max_output_bytes, advice="")
        err = OutputCapture(2 * _STDERR_TAIL, advice="")
        try:
            async with anyio.create_task_group() as pumps:
                pumps.start_soon(pump, process.stdout, out)
                pumps.start_soon(pump, process.stderr, err)
                ended = await self._until_exit(process)
                if ended is not None:
                    pumps.cancel_scope.cancel()
                    return ended
                # Nothing the command started outlives it, and a descendant that escaped the
                # group and holds a pipe open delays the result by DRAIN_SECONDS at most.
                signal_group(process.pid, signal.SIGKILL)
                with anyio.move_on_after(DRAIN_SECONDS):
                    await out.done.wait()
                    await err.done.wait()
                pumps.cancel_scope.cancel()
            code = process.returncode
            return _outcome(self._argv[0], -1 if code is None else code, out, err)
        finally:
            self._cancel = None
            with anyio.CancelScope(shield=True):
                await _end_group(process, grace=provider.kill_grace)

    async def _until_exit(self, process: Process) -> ChildOutcome | None:
        """Wait for the command to exit: ``None`` when it did, else how the run ended."""
        with anyio.CancelScope() as cancel:
            self._cancel = cancel
            if self._stopped:
                cancel.cancel()
            with anyio.move_on_after(self._provider.timeout) as deadline:
                await process.wait()
            if deadline.cancelled_caught:
                return error_outcome(
                    f"{self._argv[0]!r} did not finish within {self._provider.timeout} s",
                    code="run-error",
                    data={"exit_code": None},
                )
            return None
        return ChildOutcome(status="stopped")


def _outcome(program: str, code: int, stdout: OutputCapture, stderr: OutputCapture) -> ChildOutcome:
    text = stdout.text().strip()
    if code == 0:
        return ChildOutcome(status="completed", text=text, turns=1)
    tail = stderr.text().strip()[-_STDERR_TAIL:]
    return error_outcome(
        f"{program!r} exited with status {code}" + (f": {tail}" if tail else ""),
        code="run-error",
        text=text,
        data={"exit_code": code},
    )


async def _end_group(process: Process, *, grace: float) -> None:
    """End the process and everything it started (its process group)."""
    if process.returncode is None:
        signal_group(process.pid, signal.SIGTERM)
        with anyio.move_on_after(grace):
            await process.wait()
    signal_group(process.pid, signal.SIGKILL)
    if process.returncode is None:
        await process.wait()
    await process.aclose()


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
