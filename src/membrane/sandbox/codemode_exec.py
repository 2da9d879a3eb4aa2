"""Run one Code Mode program in its own process, reaching tools only through a channel.

Started as ``python -I -S codemode_exec.py`` (inside the OS sandbox) with the SDK source and
the program on standard input as one JSON line ``{"sdk": SOURCE, "code": PROGRAM}``. The
program's body runs as an ``async def`` with ``tools`` (the SDK module) in scope. Every SDK
function sends ``{"call": NAME, "arguments": {...}}`` as one line on the channel (the process's
standard output, kept apart from the program's own output) and waits for ``{"result": ...}`` or
``{"error": {...}}`` on standard input. At the end one line ``{"done": true, "value": ...,
"output": ...}`` (or ``{"done": true, "error": ...}``) is written.

Nothing of Membrane is in this process: no registry, no view, no scope. Whatever the program
does with the SDK's internals (``__closure__``, ``gc``, ``sys.modules``), all it can reach is the
channel, and the host answers every call through the view.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
import traceback
import types

_CHANNEL = sys.stdout
_REPLIES = sys.stdin


class ToolError(Exception):
    """A tool call the host answered with an error; ``code`` is Membrane's error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def _send(message: dict[str, object]) -> None:
    _CHANNEL.write(json.dumps(message, default=str) + "\n")
    _CHANNEL.flush()


async def _call(name: str, arguments: dict[str, object]) -> object:
    _send({"call": name, "arguments": arguments})
    line = await asyncio.to_thread(_REPLIES.readline)
    if not line:
        raise ToolError("channel-closed", "the host closed the tool channel")
    reply = json.loads(line)
    if "error" in reply:
        error = reply["error"]
        raise ToolError(str(error.get("code")), str(error.get("message")))
    return reply.get("result")


async def _run(code: str, sdk: types.ModuleType) -> object:
    body = "".join(f"    {line}\n" for line in code.splitlines()) or "    pass\n"
    namespace: dict[str, object] = {"tools": sdk, "ToolError": ToolError}
    exec(compile(f"async def __program__():\n{body}", "<code mode>", "exec"), namespace)
    program = namespace["__program__"]
    return await program()  # type: ignore[operator]


def main() -> None:
    request = json.loads(_REPLIES.readline())
    sdk = types.ModuleType("membrane_tools")
    exec(compile(request["sdk"], "<membrane tools>", "exec"), sdk.__dict__)
    sdk.bind(_call)
    output = io.StringIO()
    sys.stdout = output  # the program's prints never reach the channel
    try:
        value = asyncio.run(_run(request["code"], sdk))
    except BaseException as exc:  # the program's failure is its result, never this process's
        sys.stdout = _CHANNEL
        trace = traceback.format_exception_only(type(exc), exc)[-1].strip()
        _send({"done": True, "error": trace, "output": output.getvalue()})
        return
    sys.stdout = _CHANNEL
    _send({"done": True, "value": value, "output": output.getvalue()})


if __name__ == "__main__":
    main()
