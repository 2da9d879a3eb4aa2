"""``ChildTasks``: the tasks that drive one runtime's children, each spawned light, all joined.

A child runs in a task of its own for as long as it lives, so whatever its task costs beyond
its coroutine is held once per live child, and the garbage collector's full passes follow all
of it. anyio's ``TaskGroup.start_soon`` gives every task a handle with a cancel scope of its
own (and that scope's two sets), a finished event (three objects), a wrapper coroutine, a done
callback closing over three cells, a task state and two weak references: about twenty objects.
A child's task here is a plain ``asyncio.Task`` instead (the task, its copy of the context and
its first step), kept in one set and joined when the runtime closes. Membrane runs on asyncio
only (anyio's asyncio backend): ``running_loop`` refuses another event loop (trio) with
``invalid-request`` before the runtime opens anything.

What the group gave is kept:

* ``join()`` returns once every child's task has ended, tasks spawned while it waits
  included; like a task group's exit it is shielded from the host's cancellation. The
  scheduler asks every run to stop before it joins, and a provider's ``stop()`` ends its run
  (each built-in provider cancels the run's own cancel scope);
* an exception that leaves a child's task (``Finisher.drive`` makes every ``Exception`` of a
  run its error result, so only a failure of finishing it) cancels the runtime's group, and so
  the host's ``async with`` body, as a failing task cancels its group, and ``join()`` raises
  it in a ``BaseExceptionGroup``, as the group's exit does.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from typing import TypeVar

import anyio
from anyio.abc import TaskGroup

from membrane.errors import InvalidRequest

__all__ = ["ChildTasks", "running_loop"]

T = TypeVar("T")


class ChildTasks:
    """The child tasks of one runtime, spawned beside its anyio ``group``."""

    __slots__ = ("_context", "_errors", "_group", "_idle", "_loop", "_on_done", "_tasks")

    def __init__(self, group: TaskGroup, loop: asyncio.AbstractEventLoop) -> None:
        self._group = group
        self._loop = loop
        self._tasks: set[asyncio.Task[None]] = set()
        self._errors: list[BaseException] = []
        self._idle: asyncio.Future[None] | None = None
        # One bound method and one context for every task's done callback (each would be an
        # object per task otherwise); the callback reads no context variable.
        self._on_done = self._done
        self._context = contextvars.copy_context()

    def spawn(self, drive: Callable[[T], Coroutine[object, object, None]], record: T) -> None:
        """Run ``drive(record)`` (a child's run, to its end) in a task of its own."""
        task = self._loop.create_task(drive(record))
        self._tasks.add(task)
        task.add_done_callback(self._on_done, context=self._context)

    async def join(self) -> None:
        """Wait, shielded, until every child's task has ended; then raise what any raised."""
        if self._tasks:
            idle = self._idle = self._loop.create_future()
            with anyio.CancelScope(shield=True):
                await idle
        errors, self._errors = self._errors, []
        if errors:
            raise BaseExceptionGroup("a child's task failed", errors)

    def _done(self, task: asyncio.Task[None]) -> None:
        tasks = self._tasks
        tasks.discard(task)
        if not task.cancelled():
            error = task.exception()
            if error is not None:
                self._errors.append(error)
                self._group.cancel_scope.cancel()
        idle = self._idle
        if not tasks and idle is not None and not idle.done():
            idle.set_result(None)


def running_loop() -> asyncio.AbstractEventLoop:
    """The running asyncio loop; ``InvalidRequest`` on another event loop (trio)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise InvalidRequest(
            "Membrane runs on asyncio only: open the runtime under asyncio "
            "(anyio.run(..., backend='asyncio') or asyncio.run)"
        ) from None
