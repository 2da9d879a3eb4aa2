"""Running a subprocess for a tool: its own process group, a deadline, bounded output.

The process starts in a new session, so its process group holds everything it spawns. When the
deadline passes the group gets ``SIGTERM``, then ``SIGKILL`` after a short grace; when the caller
is cancelled the group gets ``SIGKILL`` at once and the cancellation propagates. When the
command ends normally, anything it left running in the background is killed too: nothing a tool
call starts outlives it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from membrane.limits import MAX_TOOL_OUTPUT_BYTES

__all__ = ["DEFAULT_MAX_OUTPUT_BYTES", "ProcessOutcome", "run_process", "signal_group"]

#: Bytes kept per stream; the middle of a longer stream is dropped with a note.
DEFAULT_MAX_OUTPUT_BYTES = MAX_TOOL_OUTPUT_BYTES
#: Time a process group gets between SIGTERM and SIGKILL after its deadline.
TERMINATE_GRACE_SECONDS = 2.0
#: Time allowed, once the process has exited, for its pipes to deliver what is left.
DRAIN_SECONDS = 2.0


@dataclass(slots=True)
class OutputCapture:
    """Keeps the first and the last bytes of a stream within ``limit``, counting what it drops.

    ``advice`` ends the note that replaces the dropped middle. ``done`` is set when the stream
    that feeds it has ended.
    """

    limit: int
    advice: str = "redirect to a file and Read or Grep it to see everything"
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0
    done: anyio.Event = field(default_factory=anyio.Event)

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            keep = self.limit - self.limit // 2
            if len(self.tail) > keep:
                del self.tail[: len(self.tail) - keep]

    def text(self) -> str:
        dropped = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if dropped <= 0:
            return head + tail
        kept = f"only the first {len(self.head)} and the last {len(self.tail)} bytes are kept"
        advice = f"; {self.advice}" if self.advice else ""
        return (
            f"{head}\n[... {dropped} bytes of output omitted (of {self.total}); "
            f"{kept}{advice} ...]\n{tail}"
        )


async def pump(stream: ByteReceiveStream | None, capture: OutputCapture) -> None:
    """Feed ``capture`` from ``stream`` until it ends; ``capture.done`` is set either way."""
    try:
        if stream is not None:
            async for chunk in stream:
                capture.feed(chunk)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        capture.done.set()


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    """What a finished (or killed) process produced."""

    exit_code: int | None
    """The exit status; negative ``-N`` when signal ``N`` ended it; ``None`` after a timeout."""
    stdout: str
    stderr: str
    timed_out: bool = False
    removed: tuple[str, ...] = ()
    """Control files the command created, which the sandbox removed when it ended."""


def signal_group(pid: int, signum: int) -> None:
    """Send ``signum`` to the process group ``pid`` leads; a group already gone is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


async def _stop(process: Process) -> None:
    """Terminate the group, escalating to SIGKILL when the grace period runs out."""
    signal_group(process.pid, signal.SIGTERM)
    with anyio.move_on_after(TERMINATE_GRACE_SECONDS):
        await process.wait()
    signal_group(process.pid, signal.SIGKILL)


async def _feed(process: Process, data: bytes) -> None:
    """Write ``data`` to the process's stdin and close it; a process that stops reading (or
    exits) first is no error."""
    stream = process.stdin
    if stream is None:
        return
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await stream.send(data)
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await stream.aclose()


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    max_output: int = DEFAULT_MAX_OUTPUT_BYTES,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
) -> ProcessOutcome:
    """Run ``argv`` in ``cwd``; raises ``OSError`` when it cannot start. ``stdin``: bytes the
    process reads on its standard input, which is then closed (``None``: no stdin at all)."""
    # Shielded: a cancellation that lands while the process starts must not lose its handle,
    # or nothing would kill it; it is seen at the first checkpoint below instead.
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    out, err = OutputCapture(max_output), OutputCapture(max_output)
    timed_out = False
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(pump, process.stdout, out)
            group.start_soon(pump, process.stderr, err)
            if stdin is not None:
                group.start_soon(_feed, process, stdin)
            with anyio.move_on_after(timeout) as deadline:
                await process.wait()
            if deadline.cancelled_caught:
                timed_out = True
                await _stop(process)
            else:
                signal_group(process.pid, signal.SIGKILL)
            with anyio.move_on_after(DRAIN_SECONDS):
                await out.done.wait()
                await err.done.wait()
            group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            signal_group(process.pid, signal.SIGKILL)
            await process.aclose()
    return ProcessOutcome(
        exit_code=None if timed_out else process.returncode,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
    )
