"""What every child run as an outside process shares (``CommandProvider``, ``AcpProvider``).

Such a child is a separate program under an OS sandbox: it has a ``Scope`` (its view, for the
requests it makes back), an OS ``Boundary``, no in-process conversation, and it cannot be
steered or sent notices. ``ExternalChild`` holds that lifecycle once: ``stop()`` cancels the
run's cancel scope (or keeps a run that has not started from starting), and ``sandboxed()``
gives the run its private temporary folder where the sandbox needs one (Landlock) and removes
the control paths the sandbox planted when the run ends, however it ends.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import anyio

from membrane.errors import InvalidRequest
from membrane.json_types import JSONDict
from membrane.models.base import Message
from membrane.runtime.provider import ChildOutcome
from membrane.sandbox.boundary import Boundary
from membrane.sandbox.runner import Sandbox
from membrane.tools.scope import Scope

__all__ = ["ExternalChild", "check_timeout", "error_outcome"]


def check_timeout(timeout: float | None) -> float | None:
    """``timeout`` (seconds for a whole run, or ``None``) when it is a positive number."""
    if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
        raise InvalidRequest(f"timeout must be a positive number of seconds, got {timeout!r}")
    return timeout


def error_outcome(
    message: str, *, code: str, text: str = "", data: JSONDict | None = None
) -> ChildOutcome:
    """A failed run's outcome: the error's ``code`` and ``message`` (and ``data`` when given)."""
    error: JSONDict = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return ChildOutcome(status="error", text=text, error=error)


class ExternalChild:
    """The part of a provider child that runs an outside process under ``sandbox``."""

    def __init__(self, scope: Scope, sandbox: Sandbox) -> None:
        self._scope = scope
        self._sandbox = sandbox
        self._cancel: anyio.CancelScope | None = None
        self._stopped = False
        self.pid: int | None = None

    @property
    def scope(self) -> Scope:
        return self._scope

    @property
    def boundary(self) -> Boundary:
        """The OS boundary the process runs under."""
        return self._sandbox.boundary

    def steer(self, message: str) -> bool:
        return False

    def notify(self, message: str, *, on_delivered: Callable[[], None] | None = None) -> bool:
        return False

    def messages(self) -> Sequence[Message]:
        return ()

    def stop(self) -> None:
        self._stopped = True
        if self._cancel is not None:
            self._cancel.cancel()

    def discard(self) -> None:
        self.stop()

    @contextlib.contextmanager
    def sandboxed(self, prefix: str) -> Iterator[Path | None]:
        """The run's private temporary folder (``None`` where the sandbox needs none); the
        planted control paths are removed when the block ends."""
        landlock = self._sandbox.backend == "landlock"
        with (
            tempfile.TemporaryDirectory(prefix=prefix) if landlock else contextlib.nullcontext()
        ) as tmp:
            try:
                yield None if tmp is None else Path(tmp)
            finally:
                self._sandbox.remove_planted()
