"""The test-double models' ``requests``: every request read back equal to the one received,
kept without quadratic growth over a long run (allocations counted, never timed)."""

from __future__ import annotations

import tracemalloc

import anyio
import pytest

from membrane.models.base import Message, ModelRequest, ModelResponse
from membrane.testing import FunctionModel, RequestLog, ScriptedModel

pytestmark = pytest.mark.anyio


async def _ok(request: ModelRequest) -> ModelResponse:
    return ModelResponse(text="ok")


async def _converse(model: FunctionModel, turns: int, *, run_id: str = "r1") -> None:
    messages: tuple[Message, ...] = ()
    for turn in range(turns):
        messages = (*messages, Message(role="user", content=f"turn {turn} " + "x" * 50))
        reply = await model.request(ModelRequest("worker", run_id, "system", messages))
        messages = (*messages, reply.message())


async def test_every_request_reads_back_equal_to_the_one_received() -> None:
    seen: list[ModelRequest] = []

    async def answer(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return ModelResponse(text=f"reply {len(seen)}")

    model = FunctionModel(answer)
    # Two runs interleaved, and one request that does not extend its run's last (compaction).
    first = (Message(role="user", content="a"),)
    await model.request(ModelRequest("lead", "r1", "s", first))
    await model.request(ModelRequest("worker", "r2", "t", (Message(role="user", content="b"),)))
    second = (*first, Message(role="assistant", content="reply 1"), Message("user", "c"))
    await model.request(ModelRequest("lead", "r1", "s", second, model="m"))
    compacted = (Message(role="user", content="summary", kind="summary"),)
    await model.request(ModelRequest("lead", "r1", "s", compacted))
    await model.request(ModelRequest("lead", "r1", "s", (*compacted, Message("user", "d"))))
    assert isinstance(model.requests, RequestLog)
    assert len(model.requests) == 5
    assert model.requests == seen
    assert list(model.requests) == seen
    assert [model.requests[i] for i in range(5)] == seen
    assert model.requests[-1] == seen[-1] and model.requests[1:3] == seen[1:3]
    assert model.requests[2].messages == second and model.requests[2].model == "m"
    assert model.requests != seen[:4] and FunctionModel(_ok).requests == []
    with pytest.raises(IndexError):
        model.requests[5]


def _retained(turns: int) -> int:
    """Bytes still allocated after a run of ``turns`` while its model is alive: what the
    model's record of the requests keeps (the run's own tuples are gone by then)."""
    model = FunctionModel(_ok)
    anyio.run(_converse, model, 2)  # the event loop's one-time allocations
    model = FunctionModel(_ok)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        anyio.run(_converse, model, turns)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(model.requests) == turns
    return kept


@pytest.mark.costs
def test_a_long_run_is_kept_in_memory_linear_in_its_turns() -> None:
    small, large = _retained(100), _retained(800)
    # Eight times the turns: linear growth keeps about 8x; keeping every request whole would
    # keep about 64x (each holds the whole conversation so far).
    assert large <= 12 * small, (small, large)


async def test_scripted_model_requests_are_a_request_log_too() -> None:
    model = ScriptedModel({"agents": {"worker": [{"text": "one"}, {"text": "two"}]}})
    first = ModelRequest("worker", "r1", "s", (Message(role="user", content="go"),))
    reply = await model.request(first)
    second = ModelRequest("worker", "r1", "s", (*first.messages, reply.message()))
    await model.request(second)
    assert isinstance(model.requests, RequestLog)
    assert model.requests == [first, second]
