"""A child asks its parent: the ``AskParent`` tool, the question and its answer.

A definition with ``may_ask_parent: true`` gives its runs the ``AskParent`` tool. A call:

1. **Asks.** In one transaction the question is recorded in the child's session header
   (``meta["question"] = {"id", "text", "call_id", "parent_id"}``) and, unless the parent is
   waiting on that child right now (``TaskWait``, a foreground ``Task``: the wait returns it),
   a ``question`` delivery is written to the parent's outbox, which reaches it as a
   ``<task_question>`` notice at its next turn boundary (``membrane.durable.deliveries``). The
   ``question`` event records it. The parent's waits on the child return at once while it has
   an open question: the run's entry carries ``question: {"id", "text"}``.
2. **Waits.** The call waits, the child's run holding its place (its slot, its budgets: wall
   time still counts; a stop ends the wait and the run as any stop does).
3. **Is answered.** A message to the child while its question is open (``TaskMessage``, or the
   host's ``message``, kind ``answer``) is an ``answer`` delivery: an outbox item like any
   other. Offered to the waiting child it completes the call, which returns ``{"answer",
   "from"}``, clears the question and records the ``answer`` event, and the item is delivered.

Across a restart: the child left waiting is interrupted with its question still in its header,
the parent's answer is written to the outbox all the same, and the resumed child's waiting call
is answered from that item (``answered_calls``, read when its history is rebuilt) instead of
as interrupted; the item is then acknowledged.

A run with no parent gets ``no-parent``; a parent that has ended, ``parent-ended``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import anyio

from membrane.durable.outbox import OutboxDrainer
from membrane.durable.runs import QUESTION_KEY, LiveRun
from membrane.durable.transcripts import append_transcript
from membrane.errors import NoOpenQuestion, NoParent, ParentEnded, StoreError
from membrane.json_types import JSONDict
from membrane.loop.calls import Emit
from membrane.runtime.runs import LiveRuns
from membrane.store.base import OutboxItem, Store
from membrane.tools.spec import Tool, ToolContext
from membrane.vocabulary import ASK_PARENT_TOOL, END_STATES

__all__ = ["ASK_PARENT_SCHEMA", "Questions", "answer_result", "answered_calls", "ask_parent_tool"]

ASK_PARENT_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "question": {
            "type": "string",
            "minLength": 1,
            "description": "What you need to know; your parent reads exactly this.",
        }
    },
    "required": ["question"],
    "additionalProperties": False,
}
_DESCRIPTION: Final = (
    "Ask the agent that started you a question and wait for its answer, which this tool "
    "returns. Ask only what you cannot find out yourself: you wait until your parent answers."
)


@dataclass(slots=True)
class _Waiting:
    """One ``AskParent`` call waiting for its answer."""

    run_id: str
    parent_id: str
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: str = ""


class Questions:
    """The open questions of one runtime's runs.

    ``commit(work)`` runs store work in one transaction with the queued events; ``emit(run_id)``
    is a run's event callback; ``outbox`` writes and offers the deliveries.
    """

    def __init__(
        self,
        store: Store,
        *,
        runs: LiveRuns,
        outbox: OutboxDrainer,
        commit: Callable[[Callable[[], Any]], Any],
        emit: Callable[[str], Emit],
        post: Callable[..., None],
    ) -> None:
        self._store = store
        self._runs = runs
        self._outbox = outbox
        self._commit = commit
        self._emit = emit
        self._post = post
        self._waiting: dict[str, _Waiting] = {}
        self._asked = anyio.Event()

    @property
    def asked(self) -> anyio.Event:
        """Set when any run asks a question (then replaced): what a parent's wait watches."""
        return self._asked

    def open(self, run_id: str) -> JSONDict | None:
        """``run_id``'s open question (``{"id", "text", "call_id", "parent_id"}``), as its
        stored header keeps it; ``None`` when it has none. A run stopped (or interrupted)
        while it waited keeps its question: the answer reaches it when it is resumed."""
        record = self._runs.live(run_id)
        if record is not None and not record.finished and record.question is None:
            return None
        header = self._store.get_header(run_id)
        if header is None:
            return None
        stored = header.meta.get(QUESTION_KEY)
        if not isinstance(stored, Mapping) or not isinstance(stored.get("id"), str):
            return None
        return dict(stored)

    async def ask(self, run_id: str, text: str, *, call_id: str | None) -> JSONDict:
        """Ask ``run_id``'s parent ``text`` and wait for the answer (see the module)."""
        record = self._runs.live(run_id)
        parent_id = None if record is None else record.parent_id
        if record is None or parent_id is None:
            raise NoParent(
                f"run {run_id!r} has no parent to ask: it was started by a host, not by an "
                "agent; decide for yourself, or say in your answer what you need to know",
                run_id=run_id,
            )
        self._check_parent(run_id, parent_id)
        question_id = f"{run_id}/{call_id or len(self._waiting)}"
        waiting = _Waiting(run_id, parent_id)
        self._waiting[question_id] = waiting
        stored: JSONDict = {
            "id": question_id,
            "text": text,
            "call_id": call_id,
            "parent_id": parent_id,
        }
        payload: JSONDict = {
            "kind": "question",
            "run_id": run_id,
            "agent": record.agent,
            "question": question_id,
            "text": text,
        }
        collecting = record.parent_waits > 0
        store = self._store

        def work() -> int | None:
            store.update_meta(run_id, {QUESTION_KEY: stored})
            return None if collecting else self._outbox.deliver(parent_id, payload)

        try:
            self._emit(run_id)("question", {"question": question_id, "text": text})
            item = self._commit(work)
            record.question = {"id": question_id, "text": text}
            self._asked.set()
            self._asked = anyio.Event()
            if item is not None:
                self._outbox.offer_item(item, parent_id, payload)
            await waiting.answered.wait()
        finally:
            self._waiting.pop(question_id, None)
            if record.question is not None and record.question.get("id") == question_id:
                record.question = None
        return {"answer": waiting.answer, "from": parent_id}

    def answer_payload(
        self, run_id: str, text: str, *, sender: str, request_id: str | None
    ) -> JSONDict:
        """The ``answer`` delivery of ``text`` to ``run_id``'s open question
        (``NoOpenQuestion`` when it has none)."""
        question = self.open(run_id)
        if question is None:
            raise NoOpenQuestion(
                f"run {run_id!r} has asked no question that waits for an answer; send a "
                "ping or a brief instead",
                run_id=run_id,
            )
        return {
            "kind": "answer",
            "from": sender,
            "text": text,
            "request_id": request_id,
            "question": question["id"],
            "call_id": question.get("call_id"),
        }

    def apply(self, item: OutboxItem, record: LiveRun) -> bool:
        """Hand the ``answer`` delivery ``item`` to ``record``: its waiting call returns it,
        or (a run resumed after a kill, whose history answered the call with it) it is
        acknowledged. ``False``: no call takes it, and it is delivered as a notice."""
        payload = item.payload
        waiting = self._waiting.get(str(payload.get("question")))
        store = self._store
        text = payload.get("text")
        if waiting is not None and waiting.run_id == record.run_id:

            def answered() -> None:
                store.update_meta(record.run_id, {QUESTION_KEY: None})
                store.mark_delivered(item.id)

            try:
                self._commit(answered)
            except StoreError:
                return False
            waiting.answer = text if isinstance(text, str) else ""
            live = self._runs.live(record.run_id)
            if live is not None:
                live.question = None  # answered now: the parent's next wait must not return it
            waiting.answered.set()
            return True
        result = answer_result(payload)
        held = any(
            m.role == "tool" and m.tool_call_id == payload.get("call_id") and m.content == result
            for m in record.child.messages()
        )
        if not held:
            return False

        def acknowledged() -> None:
            append_transcript(store, record)
            store.update_meta(record.run_id, {QUESTION_KEY: None})
            store.mark_delivered(item.id)

        try:
            self._commit(acknowledged)
        except StoreError:
            return False
        return True

    def sent(
        self, run_id: str, payload: Mapping[str, Any], *, parent_id: str | None, agent: str
    ) -> None:
        """``payload`` was sent to ``run_id`` (live or stored): its question is answered (no
        longer open), and the ``answer`` event records it."""
        store = self._store
        with contextlib.suppress(StoreError):
            self._commit(lambda: store.update_meta(run_id, {QUESTION_KEY: None}))
        question = payload.get("question")
        if parent_id is not None and question is not None:
            # The question's notice to the parent, if one still waits, asks nothing now.
            self._outbox.settle(
                parent_id,
                lambda p: p.get("kind") == "question" and p.get("question") == question,
            )
        self._post(
            run_id=run_id,
            parent_id=parent_id,
            agent=agent,
            kind="answer",
            data={"question": payload.get("question"), "from": payload.get("from")},
        )

    def _check_parent(self, run_id: str, parent_id: str) -> None:
        parent = self._runs.live(parent_id)
        status: str | None = None
        if parent is not None:
            status = parent.result.status if parent.result is not None else None
        else:
            header = self._store.get_header(parent_id)
            status = None if header is None else header.status
            if header is None or status not in END_STATES:
                return
        if status is not None and status in END_STATES:
            raise ParentEnded(
                f"the parent of run {run_id!r} ({parent_id}) has ended ({status}); no one "
                "will answer: decide for yourself, or say in your answer what you need to know",
                run_id=run_id,
                parent_id=parent_id,
                status=status,
            )


def answer_result(payload: Mapping[str, Any]) -> str:
    """The ``AskParent`` call's result text for the ``answer`` delivery ``payload``."""
    return json.dumps(
        {"answer": payload.get("text"), "from": payload.get("from")}, ensure_ascii=False
    )


def answered_calls(store: Store, run_id: str) -> dict[str, str]:
    """The ``AskParent`` calls of ``run_id`` that an ``answer`` delivery answers, by call id:
    the tool result each gets when the run is resumed (its pending and dead-lettered items)."""
    answers: dict[str, str] = {}
    try:
        payloads = [item.payload for item in store.pending_outbox(recipient=run_id, limit=1000)]
        payloads += [item.payload for item in store.dead_outbox(recipient=run_id, limit=1000)]
    except StoreError:
        return answers
    for payload in payloads:
        call_id, text = payload.get("call_id"), payload.get("text")
        if payload.get("kind") == "answer" and isinstance(call_id, str) and isinstance(text, str):
            answers[call_id] = answer_result(payload)
    return answers


def ask_parent_tool(questions: Questions) -> Tool:
    """The ``AskParent`` tool of a child (its run is the calling context's)."""

    async def handler(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        run_id = context.run_id or ""
        answer = await questions.ask(run_id, str(arguments["question"]), call_id=context.call_id)
        return answer_result({"text": answer["answer"], "from": answer["from"]})

    return Tool(
        name=ASK_PARENT_TOOL,
        description=_DESCRIPTION,
        input_schema=ASK_PARENT_SCHEMA,
        handler=handler,
    )
