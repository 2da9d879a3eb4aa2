"""A network store's round trip never holds the event loop: while one run's turn write to
PostgreSQL is stuck, another run's turns go on (an ordering test: what the second run's model
saw while the first run's write was held, never how long anything took)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread
import pytest

from membrane import ModelRequest, ModelResponse
from membrane.lowlevel import PostgresStore
from membrane.models.base import ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.testing import FunctionModel

from .conftest import Project

pytestmark = pytest.mark.anyio

#: How long the held write waits for the test to release it: a bound so that a runtime that
#: blocks the loop (and so can never let the test release it) fails instead of hanging.
HELD_BOUND = 20.0


class HeldStore(PostgresStore):
    """A real ``PostgresStore`` whose transcript writes for the run named ``held_run`` wait
    until the test releases them (a stalled database, as seen by that run)."""

    held_run: str | None = None

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.entered = threading.Event()
        self.release = threading.Event()
        #: True exactly while a write is held (set before the wait, cleared once it ends).
        self.holding = False

    def append_messages(self, session_id: str, messages: Sequence[Any], *, start: int) -> int:
        if session_id == self.held_run and not self.release.is_set():
            self.holding = True
            self.entered.set()
            self.release.wait(HELD_BOUND)
            self.holding = False
        return super().append_messages(session_id, messages, start=start)


def _model(store: HeldStore, seen_while_held: list[bool]) -> FunctionModel:
    """``slow`` makes one call, then answers; ``quick`` makes three calls, then answers, and
    notes for each request whether the slow run's write was being held at that moment."""

    async def answer(request: ModelRequest) -> ModelResponse:
        turns = sum(1 for m in request.messages if m.role == "assistant")
        if request.agent == "quick":
            seen_while_held.append(store.holding)
            if turns < 3:
                call = ToolCall(f"q{turns}", "Read", {"file_path": "notes.txt"})
                return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
            return ModelResponse(text="quick done")
        if turns < 1:
            call = ToolCall("s0", "Read", {"file_path": "notes.txt"})
            return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")
        return ModelResponse(text="slow done")

    return FunctionModel(answer)


async def test_a_stuck_turn_write_of_one_run_never_stalls_another_runs_turns(
    project: Project, postgres_url: str
) -> None:
    project.agent("slow")
    project.agent("quick")
    store = HeldStore(postgres_url)
    seen_while_held: list[bool] = []
    try:
        async with project.runtime(_model(store, seen_while_held), store=store) as runtime:
            with anyio.fail_after(60):
                slow = await runtime.start(SubagentStartRequest("slow", "wait", background=True))
                store.held_run = slow.run_id
                # The slow run's second turn writes its first turn and is held there.
                await anyio.to_thread.run_sync(store.entered.wait, HELD_BOUND)
                quick = await runtime.run(SubagentStartRequest("quick", "go"))
                store.release.set()
                done = await runtime.wait(slow.run_id)
    finally:
        store.release.set()
        store.close()
    assert quick.text == "quick done" and done.text == "slow done"
    # Every one of the quick run's four model requests came while the slow write was held.
    assert seen_while_held == [True, True, True, True]
