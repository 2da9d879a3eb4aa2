"""``run_code``: a Code Mode program in a separate, sandboxed process, reaching tools only through
a channel that carries tool calls.

The program gets the scope's Code Mode SDK (:func:`~membrane.tools.codemode.render_sdk`) as
``tools``, in a fresh Python process (:mod:`membrane.sandbox.codemode_exec`) started inside the
child's OS sandbox: it may write what the child's ``Bash`` may, and nothing it starts outlives
the call. The process holds no registry, view or scope, only the SDK's source. Each SDK call
arrives here as one JSON line and runs through the scope's *current* view (``ToolView.call``),
so the program reaches exactly the tools the scope shows at that moment, whatever it does with
the SDK's internals.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from membrane.builtin_tools._support import number_arg, str_arg
from membrane.builtin_tools.paths import checkout_root
from membrane.errors import MembraneError, ToolFailed
from membrane.sandbox.runner import Sandbox, SandboxPolicy
from membrane.tools.spec import Tool, ToolContext
from membrane.tools.view import ToolView

__all__ = ["HELPER", "code_mode_tool"]

NAME = "run_code"
HELPER = Path(__file__).resolve().parents[1] / "sandbox" / "codemode_exec.py"
DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0
#: The longest line the channel accepts (one tool call or its answer).
_MAX_LINE = 8 * 1024 * 1024

DESCRIPTION = """\
Run Python code that calls your tools as typed async functions: `await tools.Read(file_path=...)`.

- The code is the body of an `async def`; `return` a value to get it back (as JSON), and \
`print` output is returned too. A failed tool call raises `ToolError` (with `.code`).
- It runs in a separate, sandboxed process: it can reach only the tools you can see, and \
write only where your commands may."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "minLength": 1, "description": "The body of an async def."},
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": MAX_TIMEOUT,
            "description": f"Seconds before the program is killed (at most {MAX_TIMEOUT:g}).",
        },
    },
    "required": ["code"],
    "additionalProperties": False,
}


async def _answer(view: ToolView, line: bytes, context: ToolContext) -> dict[str, Any]:
    try:
        request = json.loads(line)
        name, arguments = request["call"], request["arguments"]
    except (ValueError, KeyError, TypeError):
        return {"error": {"code": "invalid-request", "message": "not a tool call"}}
    try:
        value = await view.call(name, arguments, context)
    except MembraneError as exc:
        return {"error": {"code": exc.code, "message": exc.message}}
    return {
        "result": value if isinstance(value, str) else json.loads(json.dumps(value, default=str))
    }


async def _converse(
    process: Any, views: Callable[[], ToolView], code: str, context: ToolContext
) -> dict[str, Any]:
    sdk = views().code_sdk()
    await process.stdin.send((json.dumps({"sdk": sdk, "code": code}) + "\n").encode())
    lines = BufferedByteReceiveStream(process.stdout)
    while True:
        try:
            line = await lines.receive_until(b"\n", _MAX_LINE)
        except (anyio.EndOfStream, anyio.IncompleteRead):
            raise ToolFailed(
                "run_code: the program's process ended without an answer.", tool=NAME
            ) from None
        message = json.loads(line) if line.startswith(b"{") else {}
        if message.get("done") is True:
            return message
        reply = await _answer(views(), line, context)
        await process.stdin.send((json.dumps(reply, default=str) + "\n").encode())


def code_mode_tool(
    views: Callable[[], ToolView],
    *,
    sandbox: SandboxPolicy | None = None,
    default_timeout: float = DEFAULT_TIMEOUT,
) -> Tool:
    """The reserved ``run_code`` tool for the scope whose current view ``views`` returns (add
    it with ``Scope.add_reserved``). ``sandbox`` chooses the OS boundary (default: auto)."""
    policy = sandbox if sandbox is not None else SandboxPolicy()

    async def handle(arguments: Mapping[str, Any], context: ToolContext) -> dict[str, Any]:
        code = str_arg(arguments, "code", tool=NAME)
        timeout = number_arg(
            arguments, "timeout", tool=NAME, default=default_timeout, maximum=MAX_TIMEOUT
        )
        root = checkout_root(context)
        box = await anyio.to_thread.run_sync(
            lambda: Sandbox.for_checkout(
                policy.for_agent(network=context.network, read_paths=context.read_paths),
                root,
                agent=context.agent,
                writes=not context.read_only,
            )
        )
        box.prepare()
        if not context.read_only:
            await anyio.to_thread.run_sync(box.refuse_outside_links)
        with tempfile.TemporaryDirectory(prefix="membrane-code-") as tmp:
            # The helper goes by source, not path: its file may lie under a private /tmp.
            helper = [sys.executable, "-I", "-S", "-c", HELPER.read_text(encoding="utf-8")]
            argv = box.command(helper, cwd=root, tmp=Path(tmp))
            with anyio.CancelScope(shield=True):
                process = await anyio.open_process(
                    argv, cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL, start_new_session=True,
                )  # fmt: skip
            try:
                with anyio.move_on_after(timeout) as deadline:
                    done = await _converse(process, views, code, context)
                if deadline.cancelled_caught:
                    raise ToolFailed(
                        f"run_code: the program did not finish within {timeout:g} seconds and "
                        "was killed.",
                        tool=NAME,
                        limit="time",
                    )
            finally:
                with anyio.CancelScope(shield=True):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(process.pid, signal.SIGKILL)
                    await process.aclose()
            box.remove_planted()
        if "error" in done:
            return {"error": done["error"], "output": done.get("output", "")}
        return {"value": done.get("value"), "output": done.get("output", "")}

    return Tool(
        name=NAME,
        description=DESCRIPTION,
        input_schema=SCHEMA,
        handler=handle,
        mutating=True,
        reserved=True,
        # Its program may write anywhere its sandbox allows: never beside another write.
        sequential=True,
    )
