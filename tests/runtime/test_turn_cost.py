"""A turn costs the same however long the run: nothing copies the whole conversation per turn
(the loop's view of it, the model request, the transcript the store appends)."""

from __future__ import annotations

import statistics
import tracemalloc

import anyio
import pytest

from membrane.models.base import Conversation, Message, ModelRequest, ModelResponse, ToolCall
from membrane.runtime import SubagentStartRequest
from membrane.store import MemoryStore

from .conftest import Project, echo_tool

pytestmark = pytest.mark.anyio

TURNS = 1_500


class _Measured:
    """Calls ``echo`` for ``TURNS`` turns, then answers; notes the bytes each turn allocated
    beyond what it kept (the peak over the turn above where it began), counted by
    ``tracemalloc``: sizes, not times, so the figure is the same on a loaded machine."""

    name = "measured"

    def __init__(self) -> None:
        self.transient: list[int] = []
        self.requests: list[ModelRequest] = []
        self._began = 0

    async def request(self, request: ModelRequest) -> ModelResponse:
        current, peak = tracemalloc.get_traced_memory()
        if self._began:
            self.transient.append(peak - max(current, self._began))
        tracemalloc.reset_peak()
        self._began = tracemalloc.get_traced_memory()[0]
        if len(self.requests) < 3:
            self.requests.append(request)
        if len(request.messages) > 2 * TURNS:
            return ModelResponse(text="done")
        call = ToolCall(id=f"c{len(request.messages)}", name="echo", arguments={"text": "x"})
        return ModelResponse(tool_calls=(call,), stop_reason="tool_calls")


async def test_a_late_turn_allocates_no_more_than_an_early_one(project: Project) -> None:
    project.registry.register(echo_tool("echo"))
    project.agent("worker", tools="echo")
    model = _Measured()
    tracemalloc.start()
    try:
        async with project.runtime(model, store=MemoryStore()) as runtime:  # type: ignore[arg-type]
            with anyio.fail_after(120):
                result = await runtime.run(SubagentStartRequest("worker", "echo on"))
    finally:
        tracemalloc.stop()
    assert result.outcome.status == "completed" and result.outcome.turns == TURNS + 1
    early = statistics.median(model.transient[100:200])
    late = statistics.median(model.transient[-100:])
    # A copy of the conversation per turn is 8 bytes per message: about 23 KiB more at the
    # end (2,900 messages more) for each copy.
    assert late - early < 4096, (early, late)
    # The request carries a view of the conversation, equal to its messages.
    first = model.requests[0].messages
    assert isinstance(first, Conversation) and len(first) == 1
    assert first == (Message(role="user", content=first[0].content),)


def test_a_conversation_view_holds_what_it_was_made_with() -> None:
    items = [Message(role="user", content="a")]
    view = Conversation(items)
    items.append(Message(role="assistant", content="b"))
    assert len(view) == 1 and list(view) == items[:1] and view[-1] is items[0]
    assert view == (items[0],) and (items[0],) == view and view != tuple(items)
    assert view[0:] == (items[0],) and view.__add__([items[1]]) == tuple(items)
    with pytest.raises(IndexError):
        view[1]
    longer = Conversation(items)
    assert longer.extends(view) and not view.extends(longer) and longer[len(view) :] == (items[1],)
