"""Sliding-window rate limits: against a reference model, bounded memory, on the one call path."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Mapping
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from membrane import Tool, ToolContext, ToolRegistry
from membrane.config.values import RateLimit
from membrane.errors import RateLimited
from membrane.tools.ratelimit import RateLimiter
from membrane.tools.scope import Scope


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def reference(
    history: list[tuple[float, str, str]], limits: Mapping[str, tuple[int, float]]
) -> list[float | None]:
    """The obvious model: every admitted call kept forever; a call is admitted when fewer than
    ``max_calls`` admitted calls of its key lie in ``(now - window, now]``."""
    admitted: dict[tuple[str, str], list[float]] = {}
    answers: list[float | None] = []
    for now, session, tool in history:
        if tool not in limits:
            answers.append(None)
            continue
        max_calls, window = limits[tool]
        inside = [t for t in admitted.get((session, tool), []) if t > now - window]
        if len(inside) < max_calls:
            admitted.setdefault((session, tool), []).append(now)
            answers.append(None)
        else:
            answers.append(inside[-max_calls] + window - now)
    return answers


calls = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=5, allow_nan=False),
        st.sampled_from(["s1", "s2", "s3"]),
        st.sampled_from(["Bash", "Read", "Write"]),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(
    steps=calls,
    bash=st.tuples(st.integers(1, 4), st.sampled_from([0.5, 1.0, 2.5])),
    read=st.tuples(st.integers(1, 3), st.sampled_from([0.25, 3.0])),
)
def test_the_window_admits_exactly_what_the_reference_model_admits(
    steps: list[tuple[float, str, str]], bash: tuple[int, float], read: tuple[int, float]
) -> None:
    clock = Clock()
    limits = {"Bash": bash, "Read": read}
    limiter = RateLimiter(
        {name: RateLimit(max_calls=n, window_seconds=w) for name, (n, w) in limits.items()},
        clock=clock,
    )
    history: list[tuple[float, str, str]] = []
    now = 0.0
    for delta, session, tool in steps:
        now += delta
        history.append((now, session, tool))
    got: list[float | None] = []
    for now, session, tool in history:
        clock.now = now
        got.append(limiter.try_acquire(session, tool))
    want = reference(history, limits)
    assert [g is None for g in got] == [w is None for w in want]
    for g, w in zip(got, want, strict=True):
        if g is not None and w is not None:
            assert g == pytest.approx(w)
    _, stamps = limiter.stored()
    assert stamps <= sum(n for n, _ in limits.values()) * 3  # at most max_calls per key


def test_an_exceeded_call_says_when_to_retry() -> None:
    clock = Clock()
    limiter = RateLimiter({"Bash": RateLimit(max_calls=2, window_seconds=10)}, clock=clock)
    limiter.acquire("s", "Bash")
    clock.now = 4
    limiter.acquire("s", "Bash")
    clock.now = 6
    with pytest.raises(RateLimited) as caught:
        limiter.acquire("s", "Bash")
    assert caught.value.code == "rate-limited"
    assert caught.value.data["retry_after_seconds"] == pytest.approx(4)
    clock.now = 10
    limiter.acquire("s", "Bash")  # the first call has left the window
    limiter.acquire("other", "Bash")  # per session


def _noop_registry(limits: Mapping[str, RateLimit]) -> ToolRegistry:
    async def noop(arguments: Mapping[str, Any], context: ToolContext) -> str:
        return "ok"

    registry = ToolRegistry()
    registry.register(Tool("noop", "Does nothing.", {"type": "object"}, noop))
    registry.rate_limits.configure(limits)
    return registry


async def _burst(total: int, *, sessions: int) -> tuple[int, int, int]:
    """``total`` calls through a view's ``call``: (admitted, refused, peak traced bytes)."""
    clock = Clock()
    registry = _noop_registry({})
    # A controllable clock: no waiting.
    registry.rate_limits = RateLimiter(
        {"noop": RateLimit(max_calls=50, window_seconds=1.0)}, clock=clock
    )
    view = Scope(registry, name="burst").view()
    admitted = refused = 0
    contexts = [ToolContext(session=f"s{i}") for i in range(sessions)]
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        peak = 0
        for index in range(total):
            clock.now = index * 0.001  # 1,000 calls a second, across every session
            try:
                await view.call("noop", {}, contexts[index % sessions])
                admitted += 1
            except RateLimited:
                refused += 1
            if index % 5000 == 0:
                peak = max(peak, tracemalloc.get_traced_memory()[0] - base)
    finally:
        tracemalloc.stop()
    keys, stamps = registry.rate_limits.stored()
    assert keys <= sessions and stamps <= 50 * sessions
    return admitted, refused, peak


@pytest.mark.costs
@pytest.mark.anyio
async def test_a_burst_of_100000_calls_keeps_memory_flat() -> None:
    with anyio.fail_after(120):
        small = await _burst(10_000, sessions=4)
        large = await _burst(100_000, sessions=4)
    assert small[0] + small[1] == 10_000 and large[0] + large[1] == 100_000
    assert large[1] > 0
    # Ten times the calls, the same memory: what is held is bounded by the windows alone.
    assert large[2] <= small[2] + 64 * 1024


@pytest.mark.anyio
async def test_rate_limits_hold_on_the_one_call_path_for_in_process_children() -> None:
    registry = _noop_registry({"noop": RateLimit(max_calls=2, window_seconds=3600)})
    view = Scope(registry, name="child").view()
    context = ToolContext(agent="child", run_id="run-1")
    assert await view.call("noop", {}, context) == "ok"
    assert await view.call("noop", {}, context) == "ok"
    with pytest.raises(RateLimited):
        await view.call("noop", {}, context)
    # Another run has its own window; a bad argument is refused before it counts.
    assert await view.call("noop", {}, ToolContext(agent="child", run_id="run-2")) == "ok"


def test_20000_churned_session_ids_hold_a_bounded_table_and_gain_no_calls() -> None:
    clock = Clock()
    limiter = RateLimiter(
        {"Bash": RateLimit(max_calls=2, window_seconds=60)}, clock=clock, max_sessions=100
    )
    admitted = 0
    for index in range(20_000):
        clock.now = index * 0.001
        if limiter.try_acquire(f"chat-{index}", "Bash", shared="owner") is None:
            admitted += 1
    keys, stamps = limiter.stored()
    # The table's own sessions plus the one shared window, never one per id.
    assert keys == 101 and stamps <= 2 * 101
    assert admitted == 100 + 2  # each held session called once, the shared window twice


def test_a_full_table_without_a_shared_identity_waits_for_the_oldest_window() -> None:
    clock = Clock()
    limiter = RateLimiter(
        {"Bash": RateLimit(max_calls=5, window_seconds=10)}, clock=clock, max_sessions=2
    )
    assert limiter.try_acquire("run-a", "Bash") is None
    clock.now = 3
    assert limiter.try_acquire("run-b", "Bash") is None
    clock.now = 4
    assert limiter.try_acquire("run-c", "Bash") == pytest.approx(6)  # run-a's window ends at 10
    clock.now = 10.5
    assert limiter.try_acquire("run-c", "Bash") is None  # run-a's expired window made room
    assert limiter.stored()[0] == 2
