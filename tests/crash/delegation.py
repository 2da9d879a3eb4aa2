"""The delegation the kill series runs, and the checks it must pass after any kill.

Three levels: ``lead`` (a budget on tokens and children) starts ``worker`` in the background
and waits for it; ``worker`` starts ``helper`` in the foreground; ``helper`` reads a file and
answers. Every response costs ``RESPONSE`` tokens. The in-process host drives it with
``answer`` (a pure function of the conversation, so a resumed run picks up where its stored
conversation ends); ``membrane serve`` drives it with ``SCRIPT`` (a scripted model whose turns
repeat, since a restarted server replays each run's list from its first turn).

``check(store)`` asserts what must hold whatever was killed where, once the delegation was
brought to its end: one session per request id, each child one level below its parent, every
delivery in its recipient's conversation exactly once and none left pending or dead, the
root's ledger equal to the tokens of the usage events and the children stored, and no run
left ``queued``, ``running`` or ``interrupted``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Final

from membrane.models.base import ModelRequest, ModelResponse, ToolCall, Usage
from membrane.store import SQLiteStore

ANSWER: Final = "the survey found 3 files"
LEAD_REQUEST: Final = "crash-lead"
BUDGET: Final = {"tokens": 100_000, "children": 10}
RESPONSE: Final = Usage(input_tokens=10, output_tokens=5)
UNFINISHED: Final = frozenset({"queued", "running", "interrupted"})
_DELIVERY = re.compile(r'delivery="(\d+)"')

AGENTS: Final = {
    "lead": "tools: Read\nallowed_subagents: [worker]\n",
    "worker": "tools: Read\nallowed_subagents: [helper]\n",
    "helper": "tools: Read\n",
}

_TASK = {"agent": "worker", "task": "survey the files", "background": True}
_HELP = {"agent": "helper", "task": "read notes.txt"}
_READ = {"file_path": "notes.txt"}
_USAGE = {"input_tokens": RESPONSE.input_tokens, "output_tokens": RESPONSE.output_tokens}
#: The scripted model's turns for ``membrane serve``: each agent's pair, repeated.
SCRIPT: Final = {
    "agents": {
        "lead": [
            {"tool_calls": [{"name": "Task", "arguments": {**_TASK, "background": False}}]},
            {"text": "done: " + ANSWER},
        ]
        * 10,
        "worker": [{"tool_calls": [{"name": "Task", "arguments": _HELP}]}, {"text": ANSWER}] * 10,
        "helper": [{"tool_calls": [{"name": "Read", "arguments": _READ}]}, {"text": "dug"}] * 10,
    }
}
for _turns in SCRIPT["agents"].values():
    for _turn in _turns:
        _turn["usage"] = _USAGE


def write_project(project: Path) -> None:
    folder = project / ".membrane" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    for name, extra in AGENTS.items():
        (folder / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: The {name}.\n{extra}---\nWork.\n", encoding="utf-8"
        )
    (project / "notes.txt").write_text("alpha\nbeta\ngamma\n", encoding="utf-8")


def _reply(**fields: Any) -> ModelResponse:
    return ModelResponse(usage=RESPONSE, **fields)


async def answer(request: ModelRequest) -> ModelResponse:
    """The three agents, as a pure function of the conversation so far."""
    texts = [m.content for m in request.messages]
    results = [m for m in request.messages if m.role == "tool"]
    if request.agent == "helper":
        if not results:
            return _reply(tool_calls=(ToolCall("h-read", "Read", _READ),), stop_reason="tool_calls")
        return _reply(text="dug")
    if request.agent == "worker":
        if not results:
            return _reply(tool_calls=(ToolCall("w-task", "Task", _HELP),), stop_reason="tool_calls")
        return _reply(text=ANSWER)
    if any(ANSWER in text for text in texts):
        return _reply(text="done: " + ANSWER)
    started = [m for m in results if '"run_id"' in m.content and not m.is_error]
    if not started:
        return _reply(tool_calls=(ToolCall("l-task", "Task", _TASK),), stop_reason="tool_calls")
    worker = json.loads(started[0].content)["run_id"]
    waited = sum(1 for m in results if m.tool_call_id.startswith("l-wait"))
    if waited >= 3:
        return _reply(text="lost: no answer from the worker")
    wait = ToolCall(f"l-wait-{waited}", "TaskWait", {"ids": [worker], "timeout": 60})
    return _reply(tool_calls=(wait,), stop_reason="tool_calls")


def check(store: SQLiteStore, where: str) -> dict[str, int]:
    """Assert the invariants (see the module docstring); what was counted."""
    sessions = store.list_sessions()
    by_id = {h.session_id: h for h in sessions}
    agents = Counter(h.agent for h in sessions)
    assert agents == Counter({"lead": 1, "worker": 1, "helper": 1}), (where, agents)
    requests = Counter(h.request_id for h in sessions if h.request_id is not None)
    assert all(n == 1 for n in requests.values()), (where, requests)
    for header in sessions:
        parent = by_id.get(header.parent_id) if header.parent_id else None
        expected = 0 if parent is None else parent.delegation_depth + 1
        assert header.delegation_depth == expected, (where, header.agent, header.delegation_depth)
        assert header.status == "completed", (where, header.agent, header.status)
    deliveries = 0
    for header in sessions:
        seen = Counter(
            found
            for message in store.transcript(header.session_id)
            for found in _DELIVERY.findall(str(message.get("content", "")))
        )
        assert all(n == 1 for n in seen.values()), (where, header.agent, seen)
        deliveries += len(seen)
    assert store.pending_outbox() == [] and store.dead_outbox() == [], where
    (root,) = [h for h in sessions if h.parent_id is None]
    assert (root.result or {}).get("text") == "done: " + ANSWER, (where, root.result)
    (helper,) = [h for h in sessions if h.agent == "helper"]
    read = [str(m.get("content")) for m in store.transcript(helper.session_id)]
    assert any("gamma" in text for text in read), (where, read)  # its Read ran
    spent = sum(
        int(e.data["input_tokens"]) + int(e.data["output_tokens"])
        for e in store.events()
        if e.kind == "usage"
    )
    used = root.meta["budget"]["used"]
    assert used["tokens"] == spent, (where, used, spent)
    assert used["children"] == len(sessions) - 1, (where, used)
    assert store.reap_pending_receipts(older_than=float("inf")) == [], where
    return {"sessions": len(sessions), "deliveries": deliveries, "tokens": spent}
