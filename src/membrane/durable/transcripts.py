"""Durable transcripts: a run's conversation reaches the store as it goes.

``save_transcript`` appends the messages the store does not hold yet. The runtime calls it at
the start of every turn after the first (``journal_event``), in the same transaction as the
events queued since the last write (``EventHub.commit``), so a turn costs one commit and a
process killed mid-turn loses at most the turn in flight; and once more inside the transaction
that records the run's end. Each message is written once: the record remembers how many the
store holds, so an append is one insert (the indexed check of the stored length inside it)
whatever the conversation's length. The transcript only grows, as the loop's messages do. What
else a resume needs (the start controls, the first user message) the header records at
publication (``publish``).

On a store whose calls are network round trips (``Store.remote``: PostgreSQL) the turn's write
is not made on the event loop: ``turn_barrier`` (the barrier the agent loop awaits before each
model request after the first) makes it in a worker thread, on a connection of its own, so a
slow write holds back only its own run's next request while every other run goes on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, Final

import anyio.to_thread

from membrane.durable.fencing import fence
from membrane.durable.runs import EventLog, LiveRun, RunsTable
from membrane.errors import StoreError
from membrane.loop.calls import Emit
from membrane.models.base import Message, ToolCall
from membrane.store.base import Store

__all__ = [
    "append_transcript",
    "emitter",
    "journal_event",
    "message_from_record",
    "message_record",
    "save_transcript",
    "turn_barrier",
    "turn_barriers",
]

_ROLES: Final = ("user", "assistant", "tool")
_KINDS: Final = ("text", "summary")


def emitter(run_id: str, *, hub: EventLog, store: Store, runs: RunsTable) -> Emit:
    """The ``emit`` callback of child ``run_id``: each event goes to ``hub`` (written behind,
    see ``EventHub.post``) and to the journal. Silent until ``runs`` holds the run, that is
    until it is published."""
    return _Emitter(run_id, hub, store, runs)


class _Emitter:
    """``emitter``'s callback: one object per child (a closure would be a function and a cell
    per captured name, all of them objects the collector follows)."""

    __slots__ = ("_hub", "_run_id", "_runs", "_store")

    def __init__(self, run_id: str, hub: EventLog, store: Store, runs: RunsTable) -> None:
        self._run_id = run_id
        self._hub = hub
        self._store = store
        self._runs = runs

    def __call__(self, kind: str, data: Mapping[str, Any]) -> None:
        run_id = self._run_id
        record = self._runs.live(run_id)
        if record is not None:
            hub = self._hub
            hub.post(
                run_id=run_id,
                parent_id=record.parent_id,
                agent=record.agent,
                kind=kind,
                data=data,
            )
            if kind == "turn":  # the journal's one kind (``journal_event``)
                journal_event(self._store, record, kind, data, hub=hub)


def journal_event(
    store: Store,
    record: LiveRun,
    kind: str,
    data: Mapping[str, Any],
    *,
    hub: EventLog | None = None,
) -> None:
    """The journal's view of a published child's event: at the start of every turn after the
    first, the turns before it reach the store, with ``hub``'s queued events in one
    transaction.

    Turn 1 is skipped on purpose: all it could add is the task, and its write would sit
    between ``start()`` and the child's first model request.
    """
    if kind == "turn" and data.get("turn") != 1:
        if store.remote:
            return  # written off the loop by the run's ``turn_barrier``
        if hub is None:
            save_transcript(store, record)
        else:
            hub.flush(lambda: save_transcript(store, record))


def turn_barriers(
    *, store: Store, runs: RunsTable
) -> Callable[[str], Callable[[], Awaitable[None]]]:
    """What gives each run the barrier its agent loop awaits before each model request after
    its first: the store's own (``Store.barrier``, one object shared by every run, so a live
    run holds nothing more for it), or on a ``remote`` store ``turn_barrier``."""
    if store.remote:
        return partial(turn_barrier, store=store, runs=runs)
    shared = store.barrier
    return lambda run_id: shared


def turn_barrier(run_id: str, *, store: Store, runs: RunsTable) -> Callable[[], Awaitable[None]]:
    """The barrier of run ``run_id`` on a ``remote`` store: the turn's transcript write in a
    worker thread (``journal_event`` leaves it to this), then ``Store.barrier``."""

    async def barrier() -> None:
        record = runs.live(run_id)
        if record is not None:
            # The run's own task waits here, so nothing changes its messages meanwhile.
            await anyio.to_thread.run_sync(save_transcript, store, record)
        await store.barrier()

    return barrier


def save_transcript(store: Store, record: LiveRun) -> None:
    """Append the messages of ``record``'s child that ``store`` does not hold yet.

    Never raises: a store failure leaves the messages in memory, and the next call (next turn,
    or the run's end) writes them. Inside an open transaction it is a savepoint, so a failure
    here never undoes the caller's writes.
    """
    with contextlib.suppress(StoreError):
        append_transcript(store, record)


def append_transcript(store: Store, record: LiveRun) -> None:
    """``save_transcript`` that raises: a ``StoreError`` means nothing was appended.

    The outbox items ``record``'s own waits returned (``record.settled``) are marked delivered
    in the same write once the stored transcript goes past where the wait returned, that is
    once it holds the tool result that carried them: a kill between the two never loses one.
    """
    messages = record.child.messages()
    stored = record.stored_messages
    if len(messages) <= stored:
        return
    try:
        tail = [message_record(message) for message in messages[stored:]]
        record.stored_messages = store.append_messages(record.run_id, tail, start=stored)
    except StoreError:
        # The remembered length is stale (a resumed run, or a write that a failed outer
        # transaction undid): read it once and append from there, unless the transcript
        # moved because the run did (another process drives it now: ``durable.fencing``).
        fence(store, record)
        stored = store.transcript_length(record.run_id)
        if len(messages) > stored:
            tail = [message_record(message) for message in messages[stored:]]
            record.stored_messages = store.append_messages(record.run_id, tail, start=stored)
    held = [item for item in record.settled if item[1] < record.stored_messages]
    for item_id, _ in held:
        store.mark_delivered(item_id)
    if held:
        record.settled = tuple(item for item in record.settled if item not in held)


def message_record(message: Message) -> dict[str, Any]:
    """A message as the JSON object a store keeps."""
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": [
            {"id": call.id, "name": call.name, "arguments": dict(call.arguments)}
            for call in message.tool_calls
        ],
        "tool_call_id": message.tool_call_id,
        "name": message.name,
        "is_error": message.is_error,
        "kind": message.kind,
    }


def message_from_record(data: Mapping[str, Any], *, where: str) -> Message:
    """The ``Message`` a stored record holds; a malformed record is ``StoreError``."""

    def bad(what: str) -> StoreError:
        return StoreError(
            f"{where} is malformed: {what}; the stored transcript cannot be resumed",
            where=where,
        )

    role, kind = data.get("role"), data.get("kind", "text")
    if role not in _ROLES:
        raise bad(f"role {role!r} is not one of {', '.join(_ROLES)}")
    if kind not in _KINDS:
        raise bad(f"kind {kind!r} is not one of {', '.join(_KINDS)}")
    content = data.get("content", "")
    if not isinstance(content, str):
        raise bad("content is not a string")
    calls: list[ToolCall] = []
    raw_calls = data.get("tool_calls", [])
    if not isinstance(raw_calls, list):
        raise bad("tool_calls is not a list")
    for call in raw_calls:
        if not (
            isinstance(call, dict)
            and isinstance(call.get("id"), str)
            and isinstance(call.get("name"), str)
            and isinstance(call.get("arguments"), dict)
        ):
            raise bad(f"tool call {call!r} lacks a string id and name and an arguments object")
        calls.append(ToolCall(id=call["id"], name=call["name"], arguments=call["arguments"]))
    text: dict[str, str | None] = {}
    for key in ("tool_call_id", "name"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise bad(f"{key} is not a string")
        text[key] = value
    is_error = data.get("is_error", False)
    if not isinstance(is_error, bool):
        raise bad("is_error is not a boolean")
    return Message(
        role=role,
        content=content,
        tool_calls=tuple(calls),
        tool_call_id=text["tool_call_id"],
        name=text["name"],
        is_error=is_error,
        kind=kind,
    )
