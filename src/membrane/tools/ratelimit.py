"""``RateLimiter``: per-session, per-tool sliding windows on the one call path.

``[rate_limits.TOOL] max_calls = N, window_seconds = S`` admits at most ``N`` calls of ``TOOL``
by one session in any ``S`` seconds. ``ToolView.call`` asks the limiter after the call passed
the view (role access, veto) and its schema, and before the handler runs, so the limit holds
the same in process and over the socket: there is no second call path to forget.

Memory is bounded: a key (session, tool) keeps at most ``max_calls`` timestamps (a ring: a
call is admitted only while fewer than ``max_calls`` lie inside the window, and the expired
ones are dropped first), and a key whose newest timestamp has left its window is evicted,
oldest-touched first, on later calls. So the limiter holds only keys that were active within
their window, each with at most ``max_calls`` entries, however bursty the traffic.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from types import MappingProxyType

from membrane.config.values import RateLimit
from membrane.errors import RateLimited

__all__ = ["RateLimiter"]

#: Expired keys looked at per call; eviction is amortised over calls.
_EVICT_PER_CALL = 4


class RateLimiter:
    """Sliding windows keyed by ``(session, tool)``; ``clock`` returns seconds (monotonic).

    One limiter serves one registry (every view over it shares it); ``configure`` replaces the
    windows and forgets every stored timestamp.
    """

    __slots__ = ("_clock", "_keys", "_windows")

    def __init__(
        self,
        windows: Mapping[str, RateLimit] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._windows: Mapping[str, RateLimit] = MappingProxyType({})
        self._keys: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()
        self.configure(windows or {})

    def configure(self, windows: Mapping[str, RateLimit]) -> None:
        """Use ``windows`` (tool name to its ``[rate_limits.TOOL]`` window)."""
        parsed: dict[str, RateLimit] = {}
        for tool, window in windows.items():
            max_calls, seconds = window.max_calls, window.window_seconds
            if not isinstance(max_calls, int) or isinstance(max_calls, bool) or max_calls < 1:
                raise ValueError(f"rate limit of {tool!r}: max_calls must be an integer >= 1")
            if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds <= 0:
                raise ValueError(f"rate limit of {tool!r}: window_seconds must be > 0")
            parsed[tool] = RateLimit(max_calls, float(seconds))
        self._windows = MappingProxyType(parsed)
        self._keys.clear()

    @property
    def windows(self) -> Mapping[str, RateLimit]:
        return self._windows

    def __bool__(self) -> bool:
        return bool(self._windows)

    def acquire(self, session: str, tool: str) -> None:
        """Count one call of ``tool`` by ``session``, or raise ``RateLimited`` (nothing counted)."""
        retry = self.try_acquire(session, tool)
        if retry is not None:
            window = self._windows[tool]
            raise RateLimited(
                f"tool {tool!r} is limited to {window.max_calls} calls per "
                f"{window.window_seconds:g} s for this session; retry in {retry:.3g} s",
                tool=tool,
                retry_after_seconds=retry,
                max_calls=window.max_calls,
                window_seconds=window.window_seconds,
            )

    def try_acquire(self, session: str, tool: str) -> float | None:
        """``None`` when the call is admitted (and counted); else seconds until one would be."""
        window = self._windows.get(tool)
        if window is None:
            return None
        now = self._clock()
        self._evict(now)
        key = (session, tool)
        stamps = self._keys.get(key)
        if stamps is None:
            stamps = self._keys[key] = deque(maxlen=window.max_calls)
        else:
            self._keys.move_to_end(key)
        horizon = now - window.window_seconds
        while stamps and stamps[0] <= horizon:
            stamps.popleft()
        if len(stamps) >= window.max_calls:
            return max(stamps[0] - horizon, 0.0)
        stamps.append(now)
        return None

    def stored(self) -> tuple[int, int]:
        """``(keys, timestamps)`` held now: what bounds the limiter's memory."""
        return len(self._keys), sum(len(stamps) for stamps in self._keys.values())

    def _evict(self, now: float) -> None:
        keys = self._keys
        for _ in range(_EVICT_PER_CALL):
            if not keys:
                return
            key, stamps = next(iter(keys.items()))
            window = self._windows.get(key[1])
            if window is not None and stamps and stamps[-1] > now - window.window_seconds:
                return  # the oldest-touched key is still live, so every later one may be
            del keys[key]
