"""Durable transcripts, and resuming a stored run in a new runtime.

Journal: a run's conversation reaches the store as it goes. ``save_transcript`` appends the
messages the store does not hold yet; the runtime calls it at the start of every turn after
the first (``journal_event``), so a process killed mid-turn loses at most the turn in flight,
and once more inside the transaction that records the run's end. The transcript only grows, as
the loop's messages do. With the first messages it also records the run's start controls that
the header lacks (the request's ``toolFilter``), so a resume can install them again. A run
killed during its first turn has stored nothing and cannot be resumed: it is started again.

Resume: ``resume_run`` restarts a run that ended, or that a crashed process left ``running``,
under the same run id. Everything that bounds the child is derived again, never relaxed:

* depth: the stored header's ``delegation_depth`` (validated), raised to the parent's depth + 1
  when the parent is known, so a restart never lowers a count (seed 001);
* definition: ``catalog.reload()`` and ``dispatch`` of the stored ``agent_type``, resolved as a
  fresh start of that agent would be, with the stored ``toolFilter`` and the caller's role;
  the child's scope gets the same restrictions, so an extension tool its definition did not
  select stays invisible and vetoed;
* conversation: the stored transcript, then ``message`` as the next user message.

The child is built by the spawn path itself (``Spawner._build``: setup, scope-local tools,
delegation tools) on a ``fork``-mode copy of the in-process provider, which continues the
given transcript. A child whose parent is not live here runs as its own root but keeps
``parent_id`` and its depth, so its own children are counted from it.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import anyio

from membrane.agents.definition import UNSET
from membrane.errors import (
    InvalidRequest,
    MembraneError,
    SetupFailed,
    StoreError,
    UnknownRun,
    UnsupportedCapability,
    WorktreeUnavailable,
)
from membrane.models.base import Message, ToolCall
from membrane.resolve import CallParams
from membrane.resolve.authority import resolve
from membrane.runtime.calls import SKIPPED, error_result
from membrane.runtime.capabilities import ChildSpec, ProviderChild, SetupCallback
from membrane.runtime.depth import child_depth, effective_parent_depth, validate_depth
from membrane.runtime.providers.in_process import InProcessProvider
from membrane.runtime.request import SubagentStartRequest
from membrane.runtime.runs import RunRecord
from membrane.runtime.spawn import Spawner, discard_child
from membrane.store.base import SessionHeader, Store
from membrane.tools.restriction import Restriction
from membrane.tools.scope import Scope

if TYPE_CHECKING:
    from membrane.runtime.runtime import SubagentRuntime

__all__ = [
    "CONTROLS_KEY",
    "journal_event",
    "message_from_record",
    "message_record",
    "resume_run",
    "save_transcript",
]

#: The header ``meta`` key holding the start controls a resume installs again.
CONTROLS_KEY: Final = "controls"
_INTERRUPTED = "the run was interrupted before this call returned; it did not complete"
_ROLES: Final = ("user", "assistant", "tool")
_KINDS: Final = ("text", "summary")


# -- the journal ------------------------------------------------------------------------------


def journal_event(store: Store, record: RunRecord, kind: str, data: Mapping[str, Any]) -> None:
    """The journal's view of a published child's event: at the start of every turn after the
    first, the turns before it reach the store.

    Turn 1 is skipped on purpose: all it could add is the task, and its write would sit
    between ``start()`` and the child's first model request.
    """
    if kind == "turn" and data.get("turn") != 1:
        save_transcript(store, record)


def save_transcript(store: Store, record: RunRecord) -> None:
    """Append the messages of ``record``'s child that ``store`` does not hold yet.

    Never raises: a store failure leaves the messages in memory, and the next call (next turn,
    or the run's end) writes them. Inside an open transaction it is a savepoint, so a failure
    here never undoes the caller's writes.
    """
    messages = record.child.messages()
    if not messages:
        return
    with contextlib.suppress(StoreError), store.transaction():
        stored = store.transcript_length(record.run_id)
        if stored == 0:
            store.update_meta(record.run_id, {CONTROLS_KEY: start_controls(record.child.scope)})
        if len(messages) > stored:
            tail = [message_record(message) for message in messages[stored:]]
            store.append_messages(record.run_id, tail, start=stored)


def start_controls(scope: Scope) -> dict[str, Any]:
    """The start controls installed on ``scope`` that a header does not record.

    ``tool_filter`` is every name filter on the scope (the request's ``toolFilter``, the
    caller's role) folded into one: a tool passes them all exactly when it is in every
    ``allow`` and in no ``deny``. The definition's own restriction is not a name filter; a
    resume resolves it again.
    """
    allow: frozenset[str] | None = None
    deny: set[str] = set()
    for predicate in scope.restrictions:
        if isinstance(predicate, Restriction):
            if predicate.allow is not None:
                allow = predicate.allow if allow is None else allow & predicate.allow
            deny |= predicate.deny
    if allow is None and not deny:
        return {"tool_filter": None}
    return {
        "tool_filter": {"allow": None if allow is None else sorted(allow), "deny": sorted(deny)}
    }


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


# -- resuming ---------------------------------------------------------------------------------


async def resume_run(
    rt: SubagentRuntime, run_id: str, message: str, *, caller: str | None
) -> RunRecord:
    """Build and publish the stored run ``run_id`` again, continuing with ``message``.

    The returned record is published (listed, ``published`` event with ``resumed: true``, store
    status ``running`` or ``queued``) and not yet scheduled. See ``SubagentRuntime.resume``.
    """
    if not isinstance(run_id, str) or not run_id.strip():
        raise InvalidRequest(f"run_id must be a non-empty string, got {run_id!r}", field="run_id")
    if not isinstance(message, str) or not message.strip():
        raise InvalidRequest(
            "the message a resumed run continues with must be a non-empty string",
            field="message",
            run_id=run_id,
        )
    live = rt.live_run(run_id)
    if live is not None and not live.finished:
        raise InvalidRequest(
            f"run {run_id!r} is {live.status} in this runtime; steer it instead of resuming it",
            run_id=run_id,
            status=live.status,
        )
    provider = rt.provider
    if not isinstance(provider, InProcessProvider):
        raise UnsupportedCapability(
            f"provider {provider.name!r} cannot resume a run: only the in-process provider "
            "continues a stored conversation",
            provider=provider.name,
            controls=["resume"],
        )
    header = rt.store.get_header(run_id)
    if header is None or (caller is not None and header.parent_id != caller):
        whose = "among your subagents" if caller is not None else "in the store"
        raise UnknownRun(f"no run {run_id!r} {whose} to resume", run_id=run_id)
    stored_depth = validate_depth(
        header.delegation_depth, what=f"stored delegation depth of {run_id!r}"
    )
    request = _request(header, message)
    parent = rt.live_run(header.parent_id) if header.parent_id is not None else None
    if parent is not None and parent.finished:
        parent = None
    parent_depth, depth = _depths(rt.store, header, parent, stored_depth)
    history = _history(rt.store, run_id)
    role = rt.role_restriction(request.role)
    rt.catalog.reload()
    dispatch = rt.catalog.dispatch(request.agent_type)
    spawner = _Resumer(rt, _forking(provider))
    context = spawner._parent_context(parent, parent_depth)
    authority = resolve(
        dispatch.definition,
        request.call,
        context,
        rt.deployment(dispatch.definition),
        persona=UNSET,
        tool_filter=request.restriction,
        role=role,
    )
    if authority.checkout.kind == "worktree":
        raise WorktreeUnavailable(
            f"{authority.definition.name!r} runs in its own worktree, which ended with the "
            f"first run of {run_id!r}; a worktree child cannot be resumed: start it again",
            run_id=run_id,
        )
    # The inherited-context prefix belonged to the first task; the transcript holds it.
    authority = dataclasses.replace(authority, task_prefix="")
    context = dataclasses.replace(context, transcript=history)
    built: list[ProviderChild] = []
    try:
        record = await spawner._build(
            run_id, request, authority, context, depth=depth, role=role, worktree=None, built=built
        )
        if header.parent_id is not None:
            record.has_edge = any(
                edge.child_id == run_id and edge.status == "running"
                for edge in rt.store.edges(parent_id=header.parent_id)
            )
        _publish(rt, record, parent=parent, messages=len(history))
    except BaseException:
        with anyio.CancelScope(shield=True):
            for child in built:
                await discard_child(child)
        raise
    return record


def _request(header: SessionHeader, message: str) -> SubagentStartRequest:
    """The start request a resume builds the child from, out of the stored header."""
    meta = header.meta
    agent_type = meta.get("agent_type")
    if not isinstance(agent_type, str) or not agent_type.strip():
        raise StoreError(
            f"the header of {header.session_id!r} records no agent_type; the run cannot be "
            "resolved again",
            session_id=header.session_id,
        )
    controls = meta.get(CONTROLS_KEY)
    if not isinstance(controls, dict):
        # Without them a resume could drop the request's toolFilter: fail closed.
        raise InvalidRequest(
            f"run {header.session_id!r} stored no conversation (it never ran, or was killed "
            "during its first turn); there is nothing to resume: start it again",
            run_id=header.session_id,
        )
    background, role, model = meta.get("background"), meta.get("role"), meta.get("model")
    try:
        request = SubagentStartRequest(
            agent_type=agent_type,
            task=message,
            call=CallParams(model=model) if isinstance(model, str) and model else CallParams(),
            tool_filter=controls.get("tool_filter"),
            parent_id=header.parent_id,
            background=background if isinstance(background, bool) else None,
            role=role if isinstance(role, str) else None,
        )
    except MembraneError as exc:
        raise StoreError(
            f"the header of {header.session_id!r} holds start controls that no longer "
            f"validate: {exc.message}",
            session_id=header.session_id,
            cause=exc.code,
        ) from exc
    return request


def _depths(
    store: Store, header: SessionHeader, parent: RunRecord | None, stored_depth: int
) -> tuple[int, int]:
    """The parent's depth and the child's: the stored depth, never lowered by what is known
    of the parent now (its header, its live run)."""
    if header.parent_id is None:
        return -1, stored_depth
    parent_header = store.get_header(header.parent_id)
    if parent_header is None and parent is None:
        return stored_depth - 1, stored_depth
    known = effective_parent_depth(
        stored=None if parent_header is None else parent_header.delegation_depth,
        live=None if parent is None else parent.depth,
        parent_id=header.parent_id,
    )
    parent_depth = max(known, stored_depth - 1)
    return parent_depth, child_depth(parent_depth, parent_id=header.parent_id)


def _history(store: Store, run_id: str) -> tuple[Message, ...]:
    """The stored transcript, with any call a crash left unanswered answered as interrupted
    (appended, so what is stored stays a prefix of the resumed conversation)."""
    messages = [
        message_from_record(data, where=f"message {index} of run {run_id!r}")
        for index, data in enumerate(store.transcript(run_id))
    ]
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].tool_calls), None)
    if last is not None:
        answered = {m.tool_call_id for m in messages[last + 1 :] if m.role == "tool"}
        for call in messages[last].tool_calls:
            if call.id not in answered:
                messages.append(error_result(call, SKIPPED, _INTERRUPTED))
    return tuple(messages)


def _forking(provider: InProcessProvider) -> InProcessProvider:
    """The same provider in ``fork`` mode: its child starts from ``ChildSpec.transcript``."""
    if provider.mode == "fork":
        return provider
    forking = copy.copy(provider)
    forking.mode = "fork"
    return forking


def _publish(
    rt: SubagentRuntime, record: RunRecord, *, parent: RunRecord | None, messages: int
) -> None:
    """Make the rebuilt child observable again: status and a ``published`` event (marked
    ``resumed``) in one transaction, then the listing. A live parent that began to stop
    meanwhile refuses it, as it refuses a new child."""
    store = rt.store
    rt.check_publishable(None if parent is None else parent.run_id)
    live = rt.live_run(record.run_id)
    if live is not None and not live.finished:
        raise InvalidRequest(
            f"run {record.run_id!r} was resumed by another call meanwhile; it is {live.status}",
            run_id=record.run_id,
        )
    record.status = "queued" if rt.must_queue(record) else "running"
    data: dict[str, Any] = {
        "agent_type": record.agent_type,
        "depth": record.depth,
        "background": record.background,
        "provider": record.provider,
        "tools": list(record.child.scope.view().names),
        "resumed": True,
        "messages": messages,
    }

    def write() -> int:
        store.set_status(record.run_id, record.status)
        return store.append_event(record.run_id, "published", data)

    rt.register(record, seq=rt.commit(write), data=data)


class _Resumer(Spawner):
    """The spawn path, building on a provider that continues the given transcript."""

    def __init__(self, runtime: SubagentRuntime, provider: InProcessProvider) -> None:
        super().__init__(runtime)
        self._provider = provider

    async def _create(self, spec: ChildSpec, install: object) -> ProviderChild:
        setup: SetupCallback = install  # type: ignore[assignment]
        try:
            return await self._provider.create(spec, setup)
        except SetupFailed:
            raise
        except Exception as exc:
            detail = (
                exc.message if isinstance(exc, MembraneError) else f"{type(exc).__name__}: {exc}"
            )
            raise SetupFailed(
                f"provider {self._provider.name!r} could not rebuild run {spec.run_id!r}: "
                f"{detail}; nothing was resumed",
                run_id=spec.run_id,
                step="provider",
                cause=getattr(exc, "code", None),
            ) from exc
