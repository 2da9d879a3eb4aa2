"""What the store tests share: a clock the test moves by hand."""

from __future__ import annotations

__all__ = ["Clock"]


class Clock:
    """A clock the test moves by hand, so timestamps and due times are exact."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
