"""Idempotent starts (DESIGN rule 8): the ``spawn`` receipt of a start with a ``request_id``.

A start with a ``request_id`` writes a pending receipt (``Store.begin_receipt``) after the
checks that need no action (capabilities, the request itself, an open runtime) and before
acting. Publication completes it with the run, in the publication transaction. A repeated
``request_id`` then acts on the receipt, never starting a second child:

* completed with a run: that run's current info (live here, or as its stored header says).
  A *foreground* run that is not live here and whose stored status is not an end state was
  interrupted (the process running it ended first): nobody could ever wait on it, so the
  replay is ``ChildFailed`` (``interrupted: true``, the header's status), and
  ``SubagentRuntime.resume`` is how to continue it;
* completed with an error: the same error is raised again, marked as a replay;
* pending while this runtime is still starting it: waits for that start, then acts on what
  it left (a run, an error, or a released receipt, which the waiter then acts on itself);
* pending, written by a process that is certainly dead (it names its owner: host, pid, boot
  and start time, see ``durable.owners``): the receipt is released and this start acts;
* pending otherwise (a live process, or one on another host): ``RequestPending``, until the
  owner completes it or, for an owner that cannot be judged from here, the sweeper reaps it
  after the receipt TTL.

Which failures a receipt keeps. A failure that is a property of the request is kept and
replayed, since retrying cannot succeed: a ``ConfigError`` (a bad request, an unknown subagent,
an unsupported capability, a malformed definition...), ``DepthLimitExceeded``, a ``NotFound``
(``UnknownRun``: no such parent), and ``SetupFailed`` caused by a ``ConfigError``. Any other
failure is not: a ``StoreError``, a ``WorktreeUnavailable``, a provider failure
(``SetupFailed`` caused by anything else), a refusal by the runtime's state rather than the
request (closing, or the parent ended or stopping: ``transient: true`` in the error's data), a
cancellation or an unexpected exception. Then the pending receipt is released
(``Store.release_receipt``), so a retry with the same ``request_id`` acts again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

import anyio

from membrane.durable.crashpoints import crash_point
from membrane.durable.owners import cleared
from membrane.durable.runs import EventLog, RunInfo, RunResult
from membrane.errors import (
    ChildFailed,
    ConfigError,
    DepthLimitExceeded,
    MembraneError,
    NotFound,
    RequestPending,
    RunError,
    SetupFailed,
    StoreError,
    error_class,
)
from membrane.store.base import Receipt, Store
from membrane.vocabulary import END_STATES

__all__ = ["SpawnReceipts", "keeps_failure"]


def keeps_failure(exc: BaseException) -> bool:
    """Whether a start that failed with ``exc`` keeps the failure in its receipt, to replay
    it to every retry (see the module docstring); otherwise the receipt is released."""
    if not isinstance(exc, MembraneError) or exc.data.get("transient") is True:
        return False
    if isinstance(exc, SetupFailed):
        return isinstance(exc.__cause__, ConfigError)
    return isinstance(exc, ConfigError | NotFound | DepthLimitExceeded)


class SpawnReceipts:
    """The receipts of one runtime's starts. ``live(run_id)`` is the current info of a run
    live in this runtime (``None`` when it has none)."""

    def __init__(
        self,
        store: Store,
        *,
        hub: EventLog,
        live: Callable[[str], RunInfo | None],
        owner: str | None = None,
    ) -> None:
        self._store = store
        self._owner = owner
        self._hub = hub
        self._live = live
        #: Starts in flight in this runtime, by request id, with the event a repeat waits on
        #: (made by the first repeat: a start nobody repeats meanwhile needs none).
        self._starting: dict[str, anyio.Event | None] = {}

    async def start(self, request_id: str, act: Callable[[], Awaitable[RunInfo]]) -> RunInfo:
        """Run ``act`` (build, publish and schedule the child) once for ``request_id``, or
        act on the receipt an earlier start left."""
        while True:
            receipt = self._store.begin_receipt(request_id, kind="spawn", owner=self._owner)
            if receipt is None:
                crash_point("spawn.pending")
                return await self._act(request_id, act)
            if receipt.status == "completed":
                info = self._replay(receipt)
                # Acknowledged once durable, as a start is once its publication is (which
                # ``act`` waits for itself).
                await self._store.barrier()
                return info
            if request_id not in self._starting:
                if cleared(self._store, receipt):
                    continue  # its owner died mid-start: this call starts it now
                raise RequestPending(
                    f"a start with request_id {request_id!r} is in progress in a live process "
                    f"({receipt.owner or 'owner unknown'}), or was interrupted on another host "
                    "before it published a child; retry once it completes or its receipt is "
                    "reaped (after the receipt TTL), or use a new request_id to start another "
                    "child",
                    request_id=request_id,
                    kind="spawn",
                )
            in_flight = self._starting[request_id]
            if in_flight is None:
                in_flight = self._starting[request_id] = anyio.Event()
            await in_flight.wait()

    async def _act(self, request_id: str, act: Callable[[], Awaitable[RunInfo]]) -> RunInfo:
        self._starting[request_id] = None
        try:
            return await act()
        except BaseException as exc:
            # Publication completed the receipt; a failure before it settles it here.
            settle: Callable[[], object]
            if isinstance(exc, MembraneError) and keeps_failure(exc):
                settle = partial(self._store.complete_receipt, request_id, {"error": exc.to_dict()})
            else:
                settle = partial(self._store.release_receipt, request_id)
            with contextlib.suppress(StoreError):
                self._hub.commit(settle)
            raise
        finally:
            done = self._starting.pop(request_id)
            if done is not None:
                done.set()

    def _replay(self, receipt: Receipt) -> RunInfo:
        request_id = receipt.request_id
        stored: Mapping[str, Any] = receipt.result or {}
        error = stored.get("error")
        if isinstance(error, Mapping):
            raise replayed_error(error, request_id)
        run = stored.get("run")
        if not isinstance(run, Mapping) or not isinstance(run.get("run_id"), str):
            raise StoreError(
                f"the receipt of request {request_id!r} holds neither a run nor an error",
                request_id=request_id,
            )
        live = self._live(run["run_id"])
        if live is not None:
            return live
        header = self._store.get_header(run["run_id"])
        if header is None:
            return RunInfo.from_stored(run)
        if header.status not in END_STATES:
            info = RunInfo.from_stored(run, status=header.status)
            if not info.background:
                raise _interrupted(info, request_id)
            return info
        result = None if header.result is None else RunResult.from_dict(header.result)
        return RunInfo.from_stored(run, status=header.status, result=result)


def _interrupted(info: RunInfo, request_id: str) -> ChildFailed:
    return ChildFailed(
        f"subagent {info.agent!r} ({info.run_id}), started earlier for request_id "
        f"{request_id!r}, was interrupted: it is not running in this runtime and its stored "
        f"status is still {info.status!r}, so the process that ran it ended before it did. "
        "Nothing was started now; resume the run (SubagentRuntime.resume) to continue it, or "
        "use a new request_id to start another child",
        run_id=info.run_id,
        agent=info.agent,
        status=info.status,
        error=None,
        result=None,
        interrupted=True,
        replayed=True,
    )


def replayed_error(error: Mapping[str, Any], request_id: str) -> MembraneError:
    """The stored failure of a start, raised again with its own code."""
    code = error.get("code")
    message = (
        f"{error.get('message') or 'the start failed'} (replayed: the start with request_id "
        f"{request_id!r} already failed this way; use a new request_id to try again)"
    )
    stored = error.get("data")
    data = {
        key: value
        for key, value in (stored.items() if isinstance(stored, Mapping) else ())
        if isinstance(key, str) and key not in ("code", "message")
    }
    cls = error_class(str(code)) or RunError
    try:
        replayed = cls(message, replayed=True, **data)
    except TypeError:
        replayed = RunError(message, replayed=True, original_code=code, **data)
    return replayed
