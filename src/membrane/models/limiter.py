"""One limiter per deployment for the requests a model endpoint takes: pace, tokens, concurrency.

Children that share a model share its limits, whichever tree they belong to: a ``ModelRouter``
owns one ``ModelLimiter``, and every adapter it builds for one ``[models.NAME]`` endpoint
(provider, model and base URL) draws on the same ``Lane``. A lane enforces what the entry says:

* ``requests_per_minute``: request starts are paced, one every ``60 / rpm`` seconds measured
  from the previous start, so no burst ever goes out (a fan-out of fifty children reaches the
  provider as a steady stream, never as fifty requests at once);
* ``tokens_per_minute``: each response's tokens are spent from a bucket that refills at
  ``tpm / 60`` per second up to ``tpm``; while the bucket is in debt, requests wait;
* ``max_concurrent_requests``: at most this many requests in flight at once.

A rate-limited answer (HTTP 429) pauses the whole lane for the wait the provider asked for
(``Retry-After``), so the other children do not hit the same wall in the meantime. Waits happen
before a request is sent and are never charged: nothing is spent until a response arrives.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from membrane.models.base import Model, ModelRequest, ModelResponse

__all__ = ["Lane", "LaneLimits", "LimitedModel", "ModelLimiter"]


@dataclass(frozen=True, slots=True)
class LaneLimits:
    """An endpoint's limits (``None``: no limit of that kind)."""

    requests_per_minute: float | None = None
    tokens_per_minute: int | None = None
    max_concurrent_requests: int | None = None

    def __bool__(self) -> bool:
        return any(
            value is not None
            for value in (
                self.requests_per_minute,
                self.tokens_per_minute,
                self.max_concurrent_requests,
            )
        )


class Lane:
    """The pace, token bucket and concurrency cap of one endpoint."""

    def __init__(self, limits: LaneLimits) -> None:
        self.limits = limits
        rpm = limits.requests_per_minute
        self._interval = 60.0 / rpm if rpm else 0.0
        self._next = 0.0  # monotonic time the next request may start
        self._order = anyio.Lock()  # first come, first sent
        cap = limits.max_concurrent_requests
        self._slots = anyio.Semaphore(cap) if cap else None
        self._tokens = float(limits.tokens_per_minute or 0)
        self._refilled = time.monotonic()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a place for one request: entered once the lane lets it go."""
        if self._slots is not None:
            await self._slots.acquire()
        try:
            async with self._order:
                await self._until_tokens()
                delay = self._next - time.monotonic()
                if delay > 0:
                    await anyio.sleep(delay)
                self._next = max(self._next, time.monotonic()) + self._interval
            yield
        finally:
            if self._slots is not None:
                self._slots.release()

    def pause(self, seconds: float) -> None:
        """The provider asked every request to wait ``seconds`` (a 429's ``Retry-After``)."""
        self._next = max(self._next, time.monotonic() + max(0.0, seconds))

    def spend(self, tokens: int) -> None:
        """A response used ``tokens``."""
        if self.limits.tokens_per_minute:
            self._refill()
            self._tokens -= tokens

    def _refill(self) -> None:
        cap = float(self.limits.tokens_per_minute or 0)
        now = time.monotonic()
        self._tokens = min(cap, self._tokens + (now - self._refilled) * cap / 60.0)
        self._refilled = now

    async def _until_tokens(self) -> None:
        rate = (self.limits.tokens_per_minute or 0) / 60.0
        if not rate:
            return
        self._refill()
        while self._tokens < 0:
            await anyio.sleep(-self._tokens / rate)
            self._refill()


class ModelLimiter:
    """The lanes of one deployment, one per endpoint key."""

    def __init__(self) -> None:
        self._lanes: dict[str, Lane] = {}

    def lane(self, key: str, limits: LaneLimits) -> Lane | None:
        """The lane of ``key`` (made on first use with ``limits``); ``None`` without limits."""
        if not limits:
            return None
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = Lane(limits)
        return lane


class LimitedModel:
    """``model`` with each request first held by ``lane`` (an agent definition's own limits,
    ``requests_per_minute`` and ``max_concurrent_requests``): the endpoint's lane inside
    ``model`` still applies after it, so the tighter of the two governs, never the looser."""

    def __init__(self, model: Model, lane: Lane) -> None:
        self.name = model.name
        self._model = model
        self._lane = lane

    async def request(self, request: ModelRequest) -> ModelResponse:
        async with self._lane.slot():
            return await self._model.request(request)
