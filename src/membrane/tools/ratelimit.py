"""``RateLimiter``: per-session, per-tool sliding windows on the one call path.

``[rate_limits.TOOL] max_calls = N, window_seconds = S`` admits at most ``N`` calls of ``TOOL``
by one session in any ``S`` seconds. ``ToolView.call`` asks the limiter after the call passed
the view (role access, veto) and its schema, and before the handler runs, so the limit holds
the same in process and over the socket: there is no second call path to forget.

Memory is bounded twice over. A key (session, tool) keeps at most ``max_calls`` timestamps (a
ring: a call is admitted only while fewer than ``max_calls`` lie inside the window, and the
expired ones are dropped first), and a session whose newest timestamp has left its window is
evicted (each tool's sessions are kept in the order of their last admitted call, so the expired
ones are the oldest). And at most ``max_sessions`` sessions are held per tool
(``rate_limit_sessions``): a live window is never evicted, so a caller that churns session ids
resets no limit; once the table is full, a session it does not hold counts under its caller's
trusted identity (``shared``: one window for all the owner's overflow sessions), or, with none,
is refused until the oldest window expires.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from types import MappingProxyType

from membrane.config.values import RateLimit
from membrane.errors import RateLimited

__all__ = ["RateLimiter"]

#: Sessions held per tool by default (``rate_limit_sessions``).
MAX_SESSIONS = 10_000


class RateLimiter:
    """Sliding windows keyed by ``(session, tool)``; ``clock`` returns seconds (monotonic).

    One limiter serves one registry (every view over it shares it); ``configure`` replaces the
    windows and forgets every stored timestamp.
    """

    __slots__ = ("_clock", "_max_sessions", "_tables", "_windows")

    def __init__(
        self,
        windows: Mapping[str, RateLimit] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self._clock = clock
        self._windows: Mapping[str, RateLimit] = MappingProxyType({})
        #: Per tool, each session's timestamps, oldest admitted call first.
        self._tables: dict[str, OrderedDict[str, deque[float]]] = {}
        self._max_sessions = max_sessions
        self.configure(windows or {}, max_sessions=max_sessions)

    def configure(
        self, windows: Mapping[str, RateLimit], *, max_sessions: int | None = None
    ) -> None:
        """Use ``windows`` (tool name to its ``[rate_limits.TOOL]`` window), and hold at most
        ``max_sessions`` sessions per tool (``rate_limit_sessions``; ``None``: as before)."""
        parsed: dict[str, RateLimit] = {}
        for tool, window in windows.items():
            max_calls, seconds = window.max_calls, window.window_seconds
            if not isinstance(max_calls, int) or isinstance(max_calls, bool) or max_calls < 1:
                raise ValueError(f"rate limit of {tool!r}: max_calls must be an integer >= 1")
            if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds <= 0:
                raise ValueError(f"rate limit of {tool!r}: window_seconds must be > 0")
            parsed[tool] = RateLimit(max_calls, float(seconds))
        if max_sessions is not None:
            if isinstance(max_sessions, bool) or max_sessions < 1:
                raise ValueError("rate_limit_sessions must be an integer >= 1")
            self._max_sessions = max_sessions
        self._windows = MappingProxyType(parsed)
        self._tables.clear()

    @property
    def windows(self) -> Mapping[str, RateLimit]:
        return self._windows

    def __bool__(self) -> bool:
        return bool(self._windows)

    def acquire(self, session: str, tool: str, *, shared: str | None = None) -> None:
        """Count one call of ``tool`` by ``session``, or raise ``RateLimited`` (nothing counted).
        ``shared``: the key the call counts under when the table is full (see the module)."""
        retry = self.try_acquire(session, tool, shared=shared)
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

    def try_acquire(self, session: str, tool: str, *, shared: str | None = None) -> float | None:
        """``None`` when the call is admitted (and counted); else seconds until one would be."""
        window = self._windows.get(tool)
        if window is None:
            return None
        now = self._clock()
        horizon = now - window.window_seconds
        table = self._tables.get(tool)
        if table is None:
            table = self._tables[tool] = OrderedDict()
        _evict(table, horizon)
        key = session
        if key not in table and len(table) >= self._max_sessions:
            if shared is None or shared == session:
                # Full of live windows, none of them this session's: wait for the oldest.
                oldest = next(iter(table.values()))
                return max(oldest[-1] - horizon, 0.0)
            key = shared  # one more key per trusted identity at most
        stamps = table.get(key)
        if stamps is None:
            stamps = table[key] = deque(maxlen=window.max_calls)
        while stamps and stamps[0] <= horizon:
            stamps.popleft()
        if len(stamps) >= window.max_calls:
            return max(stamps[0] - horizon, 0.0)
        stamps.append(now)
        table.move_to_end(key)
        return None

    def stored(self) -> tuple[int, int]:
        """``(keys, timestamps)`` held now: what bounds the limiter's memory."""
        tables = self._tables.values()
        keys = sum(len(table) for table in tables)
        return keys, sum(len(stamps) for table in tables for stamps in table.values())


def _evict(table: OrderedDict[str, deque[float]], horizon: float) -> None:
    """Drop the sessions whose newest call has left the window (they are the oldest)."""
    while table:
        stamps = next(iter(table.values()))
        if stamps and stamps[-1] > horizon:
            return
        table.popitem(last=False)
