"""``Bash``: run a shell command in the checkout, with a deadline and bounded output.

The command runs as ``bash -c COMMAND`` in a real subprocess whose working directory is the
checkout, with no stdin, in its own process group, inside the sandbox its policy chooses (see
:mod:`membrane.sandbox.runner`: the whole group is killed on timeout, on cancellation, and when
the command ends).

Where the sandbox is the shell guard alone,
:func:`~membrane.sandbox.shell_guard.find_shell_escape` reads the command first and refuses,
with ``path-outside-checkout``, one that changes directory or writes outside the checkout in a
way the text shows, or whose targets the text does not show; with ``path-protected``, one that
writes into the checkout's ``.git`` or ``.membrane``. That is capability shaping, not a
sandbox: the OS backends (bubblewrap, Landlock) are the boundary that contains hostile code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from membrane.builtin_tools._support import in_thread, number_arg, str_arg
from membrane.builtin_tools.paths import checkout_root
from membrane.errors import (
    PathOutsideCheckout,
    PathProtected,
    ToolArgumentsInvalid,
    ToolFailed,
    ToolSpecError,
)
from membrane.limits import MAX_TOOL_OUTPUT_BYTES
from membrane.sandbox.executables import which
from membrane.sandbox.policy import SandboxPolicy
from membrane.sandbox.runner import Sandbox
from membrane.tools.spec import Tool, ToolContext

__all__ = ["DEFAULT_BASH_TIMEOUT", "MAX_BASH_TIMEOUT", "bash_tool"]

NAME = "Bash"
DEFAULT_BASH_TIMEOUT = 120.0
MAX_BASH_TIMEOUT = 600.0

_DESCRIPTION = """\
Run a shell command with `bash -c` in the checkout (your working directory) and return \
`exit_code`, `stdout` and `stderr`.

- `timeout` is in seconds (default {default:g}, at most {maximum:g}). On timeout the command \
and everything it started are killed and `timed_out` is true.
- There is no stdin: commands must not wait for input. Background processes do not outlive \
the command.
- Output is capped at {limit} bytes per stream; the middle of longer output is dropped with a \
note. Redirect large output to a file inside the checkout and Read or Grep it.
- Commands read the checkout, the system's folders and the configured read roots (not the \
home folder, nor Membrane's state); a command that changes directory (`cd`) or writes \
(redirection, `rm`, `mv`, `cp`, `sed -i`, `curl -o`, `git -C`, ...) outside the checkout, \
or into `.git` or `.membrane`, is refused; so is one whose target is hidden in an unknown \
variable or a command substitution, and a shell fed commands on its input (`| sh`). Use \
literal paths relative to the checkout."""


def _schema(maximum: float) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "minLength": 1,
                "description": "The command line, run by `bash -c` in the checkout.",
            },
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": maximum,
                "description": f"Seconds before the command is killed (at most {maximum:g}).",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }


def bash_tool(
    *,
    default_timeout: float | None = None,
    max_timeout: float = MAX_BASH_TIMEOUT,
    max_output: int = MAX_TOOL_OUTPUT_BYTES,
    sandbox: SandboxPolicy | None = None,
) -> Tool:
    """The ``Bash`` tool (mutating).

    ``max_timeout`` bounds what a call may ask for; ``default_timeout`` (when a call names none)
    defaults to the smaller of :data:`DEFAULT_BASH_TIMEOUT` and ``max_timeout``. ``sandbox``
    chooses the OS boundary (default: the strongest this machine offers, network off).
    """
    policy = sandbox if sandbox is not None else SandboxPolicy()
    if default_timeout is None:
        default_timeout = min(DEFAULT_BASH_TIMEOUT, max_timeout)
    if not 0 < default_timeout <= max_timeout:
        raise ToolSpecError(
            f"Bash: the default timeout ({default_timeout:g} s) must be greater than 0 and at "
            f"most the maximum timeout ({max_timeout:g} s)."
        )
    if max_output < 2:
        raise ToolSpecError(f"Bash: max_output must be at least 2 bytes (got {max_output}).")

    async def handle(arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        return await _run(
            arguments,
            context,
            policy=policy,
            default_timeout=default_timeout,
            max_timeout=max_timeout,
            max_output=max_output,
        )

    description = _DESCRIPTION.format(
        default=default_timeout, maximum=max_timeout, limit=max_output
    )
    return Tool(
        name=NAME,
        description=description,
        input_schema=_schema(max_timeout),
        handler=handle,
        mutating=True,
    )


async def _run(
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
    # The runtime socket a run's commands call back on stays reachable from the sandbox: the
    # socket alone, not its folder (under $MEMBRANE_HOME, which no child reads).
    socket = context.env.get("MEMBRANE_SOCKET")
    sandbox = await in_thread(
        lambda: Sandbox.for_checkout(
            policy.for_agent(network=context.network, read_paths=context.read_paths),
            root,
            agent=agent,
            writes=not context.read_only,
            runtime_socket=Path(socket) if socket else None,
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
