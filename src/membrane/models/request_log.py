"""``RequestLog``: the requests a test-double model received, kept without quadratic growth.

Every turn of a run sends the whole conversation, so keeping each request as received holds
n messages for turn n: a run of N turns would keep N²/2 message references. The log keeps
each request's messages as a reference to an earlier request of the same run whose messages
they extend, plus the messages added since, so the memory of a run grows with the messages it
sent, not with their square. Reading a request rebuilds it, equal to the one received.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterator, Sequence
from typing import overload

from membrane.models.base import Conversation, Message, ModelRequest

__all__ = ["RequestLog"]


@dataclasses.dataclass(frozen=True, slots=True)
class _Entry:
    #: The request with ``messages`` holding only what it adds to ``base``'s.
    request: ModelRequest
    #: The index of the entry whose messages these extend, or -1.
    base: int


class RequestLog(Sequence[ModelRequest]):
    """A read-only sequence of the requests received, in order (``append`` records one).

    Compares equal to a list (or any sequence) of the same requests, so ``log == []`` and
    ``log == [first, second]`` read as they would for a list.
    """

    __slots__ = ("_entries", "_last")

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        #: run id -> (index of its latest entry, that entry's whole messages)
        self._last: dict[str, tuple[int, Sequence[Message]]] = {}

    def append(self, request: ModelRequest) -> None:
        """Record ``request`` (its messages shared with the run's previous request)."""
        messages = request.messages
        index = len(self._entries)
        previous = self._last.get(request.run_id)
        entry = _Entry(request, -1)
        if previous is not None:
            base, before = previous
            # The loop's views of one conversation extend each other (known at once);
            # otherwise the same message objects again: identity decides at C speed.
            if isinstance(messages, Conversation) and messages.extends(before):
                added: Sequence[Message] = messages[len(before) :]
                entry = _Entry(dataclasses.replace(request, messages=added), base)
            elif len(messages) >= len(before) and (
                all(map(operator.is_, messages, before)) or all(map(operator.eq, messages, before))
            ):
                added = messages[len(before) :]
                entry = _Entry(dataclasses.replace(request, messages=added), base)
        self._entries.append(entry)
        self._last[request.run_id] = (index, messages)

    def _messages(self, index: int) -> tuple[Message, ...]:
        parts: list[tuple[Message, ...]] = []
        while index >= 0:
            entry = self._entries[index]
            parts.append(tuple(entry.request.messages))
            index = entry.base
        return tuple(message for part in reversed(parts) for message in part)

    def _request(self, index: int) -> ModelRequest:
        entry = self._entries[index]
        if entry.base < 0:
            return entry.request
        return dataclasses.replace(entry.request, messages=self._messages(index))

    @overload
    def __getitem__(self, index: int) -> ModelRequest: ...

    @overload
    def __getitem__(self, index: slice) -> list[ModelRequest]: ...

    def __getitem__(self, index: int | slice) -> ModelRequest | list[ModelRequest]:
        if isinstance(index, slice):
            return [self._request(i) for i in range(len(self._entries))[index]]
        if index < 0:
            index += len(self._entries)
        if not 0 <= index < len(self._entries):
            raise IndexError("request index out of range")
        return self._request(index)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[ModelRequest]:
        # Each run's latest messages, so that a whole pass costs what the requests hold.
        latest: dict[int, Sequence[Message]] = {}
        for index, entry in enumerate(self._entries):
            if entry.base < 0:
                request = entry.request
            else:
                before = latest.pop(entry.base, None)
                if before is None:
                    before = self._messages(entry.base)
                request = dataclasses.replace(
                    entry.request, messages=(*before, *entry.request.messages)
                )
            latest[index] = request.messages
            yield request

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(map(operator.eq, self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RequestLog({list(self)!r})"
