"""Resuming a stored run in a new runtime (or again in this one).

``resume_run`` restarts a run that ended, or that a crashed process left ``running``, under the
same run id. Everything that bounds the child is derived again, never relaxed:

* depth: the stored header's ``delegation_depth`` (validated), raised to the parent's depth + 1
  when the parent is known, so a restart never lowers a count (seed 001);
* definition: ``catalog.reload()`` and ``dispatch`` of the stored ``agent_type``, resolved as a
  fresh start of that agent would be, with the start controls the header recorded at
  publication (``toolFilter``, persona, ``max_turns``) and the caller's role; the child's scope
  gets the same restrictions, so an extension tool its definition did not select stays
  invisible and vetoed;
* conversation: the stored transcript, then ``message`` as the next user message. A run killed
  before any of its transcript was stored starts again from the first user message its header
  recorded (``task``), followed by ``message``.

The child is built by the spawn path itself (``Spawner.build``: setup, scope-local tools,
delegation tools) with ``ChildSpec.resumed`` set, on a provider that advertises ``resume``: it
continues the given transcript. A child whose parent is not live here runs as its own root but keeps
``parent_id`` and its depth, so its own children are counted from it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final

import anyio

from membrane.agents.definition import UNSET
from membrane.durable.transcripts import message_from_record
from membrane.errors import (
    InvalidRequest,
    MembraneError,
    StoreError,
    UnknownRun,
    UnsupportedCapability,
    WorktreeUnavailable,
)
from membrane.limits import check_depth, child_depth
from membrane.loop.calls import SKIPPED, error_result
from membrane.models.base import Message
from membrane.resolve import CallParams
from membrane.resolve.authority import resolve
from membrane.runtime.depth import effective_parent_depth
from membrane.runtime.provider import ProviderChild
from membrane.runtime.publish import CONTROLS_KEY, TASK_KEY, republish
from membrane.runtime.request import SubagentStartRequest
from membrane.runtime.runs import RunRecord
from membrane.runtime.spawn import Spawner, discard_child
from membrane.store.base import SessionHeader, Store

if TYPE_CHECKING:
    from membrane.runtime.runtime import SubagentRuntime

__all__ = ["resume_run"]

_INTERRUPTED: Final = "the run was interrupted before this call returned; it did not complete"


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
    live = rt._live_run(run_id)
    if live is not None and not live.finished:
        raise InvalidRequest(
            f"run {run_id!r} is {live.status} in this runtime; steer it instead of resuming it",
            run_id=run_id,
            status=live.status,
        )
    provider = rt.provider
    if getattr(provider.capabilities, "resume", False) is not True:
        raise UnsupportedCapability(
            f"provider {provider.name!r} cannot resume a run: it does not advertise the "
            "`resume` capability (continuing a stored conversation)",
            provider=provider.name,
            controls=["resume"],
            capabilities=provider.capabilities.to_dict(),
        )
    header = rt.store.get_header(run_id)
    if header is None or (caller is not None and header.parent_id != caller):
        whose = "among your subagents" if caller is not None else "in the store"
        raise UnknownRun(f"no run {run_id!r} {whose} to resume", run_id=run_id)
    stored_depth = check_depth(
        header.delegation_depth, what=f"stored delegation depth of {run_id!r}"
    )
    request = _request(header, message)
    parent = rt._live_run(header.parent_id) if header.parent_id is not None else None
    if parent is not None and parent.finished:
        parent = None
    parent_depth, depth = _depths(rt.store, header, parent, stored_depth)
    history = _history(rt.store, header)
    role = rt.role_restriction(request.role)
    rt.catalog.reload()
    dispatch = rt.catalog.dispatch(request.agent_type)
    spawner = Spawner(rt)
    context = spawner.parent_context(parent, parent_depth)
    authority = resolve(
        dispatch.definition,
        request.call,
        context,
        rt.deployment(dispatch.definition),
        persona=UNSET if request.persona is None else request.persona,
        tool_filter=request.restriction,
        role=role,
        depth=depth,
    )
    if authority.checkout.kind == "worktree":
        raise WorktreeUnavailable(
            f"{authority.definition.name!r} runs in its own worktree, which ended with the "
            f"first run of {run_id!r}; a worktree child cannot be resumed: start it again",
            run_id=run_id,
        )
    # The inherited-context prefix belonged to the first task; the history holds that task.
    authority = dataclasses.replace(authority, task_prefix="")
    context = dataclasses.replace(context, transcript=history)
    built: list[ProviderChild] = []
    try:
        record = await spawner.build(
            run_id,
            request,
            authority,
            context,
            depth=depth,
            role=role,
            worktree=None,
            built=built,
            resumed=True,
        )
        if header.parent_id is not None:
            record.has_edge = any(
                edge.child_id == run_id and edge.status == "running"
                for edge in rt.store.edges(parent_id=header.parent_id)
            )
        republish(rt, record, parent=parent, messages=len(history))
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
            f"run {header.session_id!r} stored neither its start controls nor a conversation "
            "(its header predates them); there is nothing to resume: start it again",
            run_id=header.session_id,
        )
    background, role, model = meta.get("background"), meta.get("role"), meta.get("model")
    persona = controls.get("persona")
    call = {"model": model or None, "max_turns": controls.get("max_turns")}
    try:
        request = SubagentStartRequest(
            agent_type=agent_type,
            task=message,
            call=CallParams.from_mapping(call, where="stored start controls"),
            persona=UNSET if persona is None else persona,
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
    return parent_depth, child_depth(parent_depth, what=f"delegation depth of {header.parent_id!r}")


def _history(store: Store, header: SessionHeader) -> tuple[Message, ...]:
    """The stored transcript, with any call a crash left unanswered answered as interrupted
    (appended, so what is stored stays a prefix of the resumed conversation). With nothing
    stored, the first user message the header recorded at publication."""
    run_id = header.session_id
    messages = [
        message_from_record(data, where=f"message {index} of run {run_id!r}")
        for index, data in enumerate(store.transcript(run_id))
    ]
    if not messages:
        task = header.meta.get(TASK_KEY)
        if not isinstance(task, str) or not task:
            raise InvalidRequest(
                f"run {run_id!r} stored no conversation and no task (its header predates "
                "them); there is nothing to resume: start it again",
                run_id=run_id,
            )
        return (Message(role="user", content=task),)
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].tool_calls), None)
    if last is not None:
        answered = {m.tool_call_id for m in messages[last + 1 :] if m.role == "tool"}
        for call in messages[last].tool_calls:
            if call.id not in answered:
                messages.append(error_result(call, SKIPPED, _INTERRUPTED))
    return tuple(messages)
