"""``Bash``: run a shell command in the checkout, with a deadline and bounded output.

The command runs as ``bash -c COMMAND`` in a real subprocess whose working directory is the
checkout, with no stdin, in its own process group (see :mod:`membrane.builtin_tools.process`:
the whole group is killed on timeout, on cancellation, and when the command ends).

Before it runs, :func:`~membrane.builtin_tools.shell_guard.find_shell_escape` reads the command
and refuses, with ``path-outside-checkout``, one that changes directory or writes outside the
checkout in a way the text shows, or whose targets the text does not show; with
``path-protected``, one that writes into the checkout's ``.git`` or ``.membrane``. That is
capability shaping, not a sandbox: neither this check nor worktree isolation contains hostile
code, which needs an OS, container or VM boundary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from membrane.errors import ToolSpecError
from membrane.limits import MAX_TOOL_OUTPUT_BYTES
from membrane.sandbox.policy import SandboxPolicy
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
        # What runs a command is imported on the first call: declaring Bash needs none of it.
        from membrane.builtin_tools.bash_run import run_bash

        return await run_bash(
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
