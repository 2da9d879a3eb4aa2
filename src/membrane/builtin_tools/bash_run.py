"""What ``Bash`` does when called (imported on its first call): check the arguments, choose the
sandbox, refuse what the shell guard refuses, run the command and shape its outcome."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from membrane.builtin_tools._support import in_thread, number_arg, str_arg
from membrane.builtin_tools.paths import checkout_root
from membrane.errors import PathOutsideCheckout, PathProtected, ToolArgumentsInvalid, ToolFailed
from membrane.sandbox.executables import which
from membrane.sandbox.runner import Sandbox, SandboxPolicy
from membrane.tools.spec import ToolContext

__all__ = ["run_bash"]

NAME = "Bash"


async def run_bash(
    arguments: Mapping[str, Any],
    context: ToolContext,
    *,
    policy: SandboxPolicy,
    default_timeout: float,
    max_timeout: float,
    max_output: int,
) -> dict[str, Any]:
    """One ``Bash`` call, under ``policy`` and the limits ``bash_tool`` was configured with."""
    command = str_arg(arguments, "command", tool=NAME)
    if not command.strip():
        raise ToolArgumentsInvalid(
            "Bash: `command` is empty.", tool=NAME, path="$.command", reason="empty command"
        )
    timeout = number_arg(
        arguments, "timeout", tool=NAME, default=default_timeout, maximum=max_timeout
    )
    root = checkout_root(context)
    if not root.is_dir():
        raise ToolFailed(
            f"Bash: the checkout {root} is not a folder; the command cannot run there.",
            tool=NAME,
        )
    agent = context.agent
    # The runtime socket a run's commands call back on stays reachable inside the sandbox: the
    # socket alone, not its folder (under $MEMBRANE_HOME, which no child reads).
    socket = context.env.get("MEMBRANE_SOCKET")
    reachable = (Path(socket),) if socket else ()
    sandbox = await in_thread(
        lambda: Sandbox.for_checkout(
            policy.for_agent(network=context.network, read_paths=context.read_paths),
            root,
            agent=agent,
            writes=not context.read_only,
            reachable=reachable,
        )
    )
    escape = None
    if sandbox.backend == "guard":
        # A child without Write/Edit is told its memory is read-only: the guard does not
        # exempt its memory folders then (the OS backends let it write nothing at all).
        guarded = None if context.read_only else agent
        from membrane.sandbox.shell_guard import find_shell_escape

        escape = await in_thread(lambda: find_shell_escape(command, root=root, agent=guarded))
    if escape is not None:
        error = PathProtected if escape.reason == "protected" else PathOutsideCheckout
        raise error(
            f"Bash refused the command: {escape.describe(root, agent=agent)}. Commands run "
            "in the checkout and must not change directory or write "
            "outside it (nor into .git or .membrane); use literal paths inside the checkout.",
            tool=NAME,
            path=escape.path,
            resolved=None if escape.resolved is None else str(escape.resolved),
            operation=escape.operation,
            reason=escape.reason,
            checkout=str(root),
        )
    shell = which("bash")
    if shell is None:
        raise ToolFailed("Bash: no `bash` executable was found on PATH.", tool=NAME)
    try:
        outcome = await sandbox.run(
            [shell, "-c", command],
            cwd=root,
            timeout=timeout,
            max_output=max_output,
            env={**os.environ, **context.env} if context.env else None,
        )
    except OSError as exc:
        raise ToolFailed(
            f"Bash: could not start the command: {exc.strerror or exc}.", tool=NAME
        ) from exc
    result: dict[str, Any] = {
        "exit_code": outcome.exit_code,
        "stdout": outcome.stdout,
        "stderr": outcome.stderr,
    }
    if outcome.timed_out:
        result["timed_out"] = True
        result["note"] = (
            f"The command did not finish within {timeout:g} seconds and was killed, with "
            "everything it started. Pass a larger `timeout` or make the command faster."
        )
    elif outcome.exit_code is not None and outcome.exit_code < 0:
        result["note"] = f"The command was killed by signal {-outcome.exit_code}."
    if outcome.removed:
        result["removed"] = list(outcome.removed)
        result["note"] = (
            "The command created or changed control files, which were removed or put back: "
            + ", ".join(outcome.removed)
            + ". Agent definitions, settings and git metadata cannot be written."
        )
    return result
