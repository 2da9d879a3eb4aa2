"""Running one Landlock-confined command without starting an interpreter for it.

Membrane is multi-threaded (worker threads, the store's), so it cannot run Python between
``fork`` and ``exec`` of a command (``preexec_fn`` may deadlock on a lock another thread held
at the fork), and the Landlock rules, the seccomp filter and the dropped privileges must be
put in place in exactly that gap. So one *spawn helper* per Membrane process,
``landlock_exec.py --serve``, started once, does it: it is single-threaded and forks a
supervisor per command, which confines its own child before ``exec``
(:mod:`membrane.sandbox.landlock_exec`). A command then costs two forks of a small process and
one ``exec``, not an interpreter's start.

:func:`run_confined` hands the helper the command's standard input, output and error (pipes
Membrane reads, as for any process) and a socket of its own, on which the supervisor reports
the command's exit code and takes ``t`` (``SIGTERM`` to the group) and ``k`` (kill
everything); closing it (Membrane cancelled, or gone) kills everything too. The helper ends
when Membrane's end of its socket closes.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import SocketStream, UNIXSocketStream

from membrane.sandbox.landlock import HELPER
from membrane.sandbox.process import (
    DRAIN_SECONDS,
    TERMINATE_GRACE_SECONDS,
    OutputCapture,
    ProcessOutcome,
)

__all__ = ["run_confined"]

#: At most this many descriptors go with one request (stdio, the socket, and kept ones).
_MAX_FDS = 16


class _SpawnHelper:
    """The process's one spawn helper, started on first use and again if it went away."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channel: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._owner = 0

    def send(self, fds: Sequence[int]) -> None:
        """Ask for a supervisor with ``fds`` (blocking, brief); ``OSError`` when no helper
        can be had."""
        with self._lock:
            for attempt in range(2):
                channel = self._running()
                try:
                    socket.send_fds(channel, [b"s"], list(fds))
                    return
                except OSError:
                    self._discard()
                    if attempt:
                        raise

    def _running(self) -> socket.socket:
        process, channel = self._process, self._channel
        alive = process is not None and process.poll() is None
        if channel is not None and alive and self._owner == os.getpid():
            return channel
        self._discard()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            argv = [sys.executable, "-I", "-S", str(HELPER), "--serve", str(theirs.fileno())]
            self._process = subprocess.Popen(
                argv,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                cwd="/",
                start_new_session=True,
            )
        self._channel, self._owner = mine, os.getpid()
        return mine

    def _discard(self) -> None:
        if self._channel is not None and self._owner == os.getpid():
            self._channel.close()  # the helper ends when it sees this end close
        self._channel = None
        if self._process is not None:
            with contextlib.suppress(OSError):
                self._process.poll()
            self._process = None


_HELPER = _SpawnHelper()


def _request(cwd: Path, env: Mapping[str, str], args: Sequence[str]) -> bytes:
    """The request a supervisor reads: a length in 8 digits, then NUL-separated fields."""
    fields = [str(cwd), str(len(env)), *(f"{k}={v}" for k, v in env.items()), *args]
    body = b"\0".join(os.fsencode(field) for field in fields)
    return b"%08d" % len(body) + body


async def _pump(fd: int, capture: OutputCapture) -> None:
    """Feed ``capture`` from the pipe ``fd`` until it ends; ``capture.done`` is set either way."""
    try:
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                await anyio.wait_readable(fd)
                continue
            if not chunk:
                return
            capture.feed(chunk)
    except OSError:
        return
    finally:
        capture.done.set()


async def _feed(fd: int, data: bytes) -> None:
    """Write ``data`` to the pipe ``fd``; a command that stops reading first is no error."""
    view = memoryview(data)
    try:
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class _Reports:
    """The supervisor's lines (``exit N``) read from its socket."""

    def __init__(self, stream: SocketStream) -> None:
        self.stream = stream
        self._buffer = b""

    async def line(self) -> str | None:
        while b"\n" not in self._buffer:
            try:
                self._buffer += await self.stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    async def exit_code(self) -> int | None:
        """The command's exit code (128 + N when signal N ended it); ``None`` when the
        supervisor went away first."""
        while (line := await self.line()) is not None:
            if line.startswith("exit "):
                return int(line.removeprefix("exit "))
        return None

    async def order(self, what: bytes) -> None:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self.stream.send(what)


async def run_confined(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    max_output: int,
    stdin: bytes | None = None,
    keep: Sequence[int] = (),
) -> ProcessOutcome:
    """Run the command ``args`` (the helper's arguments: :func:`landlock_args`) in ``cwd``
    with ``env``; ``keep``: descriptors the command gets as 3, 4, ... Raises ``OSError`` when
    it cannot start."""
    if len(keep) + 4 > _MAX_FDS:
        raise OSError(7, f"at most {_MAX_FDS - 4} descriptors can be kept")
    opened: list[int] = []
    try:
        out_r, out_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        opened += (out_r, out_w)
        err_r, err_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        opened += (err_r, err_w)
        if stdin is None:
            in_r, in_w = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC), -1
        else:
            in_r, in_w = os.pipe2(os.O_CLOEXEC)
            os.set_blocking(in_w, False)
            opened.append(in_w)
        opened.append(in_r)
        mine, theirs = socket.socketpair()
        channel = mine.detach()  # a descriptor until the helper has its end: closed on failure
        opened.append(channel)
        with theirs:
            # The command's end of each pipe must block, as a process's pipes do.
            os.set_blocking(out_w, True)
            os.set_blocking(err_w, True)
            _HELPER.send([in_r, out_w, err_w, theirs.fileno(), *keep])
        for fd in (in_r, out_w, err_w):
            os.close(fd)
            opened.remove(fd)
    except BaseException:
        for fd in opened:
            os.close(fd)
        raise
    mine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=channel)
    stream = await UNIXSocketStream.from_socket(mine)
    reports = _Reports(stream)
    out, err = OutputCapture(max_output), OutputCapture(max_output)
    timed_out, code = False, None
    try:
        async with stream, anyio.create_task_group() as group:
            await stream.send(_request(cwd, env, args))
            group.start_soon(_pump, out_r, out)
            group.start_soon(_pump, err_r, err)
            if in_w >= 0:
                group.start_soon(_feed, in_w, stdin or b"")
                in_w = -1
            with anyio.move_on_after(timeout) as deadline:
                code = await reports.exit_code()
            if deadline.cancelled_caught:
                timed_out = True
                await reports.order(b"t")
                with anyio.move_on_after(TERMINATE_GRACE_SECONDS):
                    await reports.exit_code()
                await reports.order(b"k")
            with anyio.move_on_after(DRAIN_SECONDS):
                await out.done.wait()
                await err.done.wait()
            group.cancel_scope.cancel()
    finally:
        for fd in (out_r, err_r, in_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
    if code is None and not timed_out:
        raise OSError(5, "the sandbox's spawn helper ended before the command did")
    return ProcessOutcome(
        exit_code=None if timed_out else code,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
    )
