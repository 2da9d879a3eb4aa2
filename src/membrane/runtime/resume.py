"""What a stored run says, for a resume (``StartPath.resumed``) to build it again.

A resume restarts a run that ended, or that a crashed process left ``running``, under the same
run id. Everything that bounds the child is derived again, never relaxed:

* depth (``resumed_depths``): the stored header's ``delegation_depth`` (validated), raised to
  the parent's depth + 1 when the parent is known, so a restart never lowers a count (seed 001);
* the start request (``stored_request``): the stored ``agent_type`` with the start controls the
  header recorded at publication (``toolFilter``, persona, ``max_turns``) and the caller's role;
  the start path dispatches and resolves it as a fresh start of that agent would be, so an
  extension tool its definition did not select stays invisible and vetoed;
* conversation (``stored_history``): the stored transcript, then the resume's message as the
  next user message. A run killed before any of its transcript was stored starts again from the
  first user message its header recorded (``task``), followed by the message.
"""

from __future__ import annotations

from typing import Final

from membrane.agents.definition import UNSET
from membrane.durable.transcripts import message_from_record
from membrane.errors import InvalidRequest, MembraneError, StoreError
from membrane.limits import child_depth
from membrane.loop.calls import SKIPPED, error_result
from membrane.models.base import Message
from membrane.resolve import CallParams
from membrane.runtime.depth import effective_parent_depth
from membrane.runtime.publish import CONTROLS_KEY, TASK_KEY
from membrane.runtime.questions import answered_calls
from membrane.runtime.request import SubagentStartRequest
from membrane.runtime.runs import RunRecord
from membrane.store.base import SessionHeader, Store

__all__ = ["resumed_depths", "stored_history", "stored_request"]

_INTERRUPTED: Final = "the run was interrupted before this call returned; it did not complete"


def stored_request(header: SessionHeader, message: str) -> SubagentStartRequest:
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
    call: dict[str, object] = {"model": model or None, "max_turns": controls.get("max_turns")}
    if isinstance(background, bool):
        # The resolved flag of the first start: a background child stays one, so the
        # completion notice it owes its parent is written (never lost across a crash).
        call["run_in_background"] = background
    try:
        request = SubagentStartRequest(
            agent_type=agent_type,
            task=message,
            call=CallParams.from_mapping(call, where="stored start controls"),
            persona=UNSET if persona is None else persona,
            tool_filter=controls.get("tool_filter"),
            rules=controls.get("rules") or None,
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


def resumed_depths(
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


def stored_history(store: Store, header: SessionHeader) -> tuple[Message, ...]:
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
        # An ``AskParent`` call its parent answered while the run was down returns the answer.
        answers = answered_calls(store, run_id)
        for call in messages[last].tool_calls:
            if call.id in answered:
                continue
            if call.id in answers:
                messages.append(
                    Message(
                        role="tool", content=answers[call.id], tool_call_id=call.id, name=call.name
                    )
                )
            else:
                messages.append(error_result(call, SKIPPED, _INTERRUPTED))
    return tuple(messages)
