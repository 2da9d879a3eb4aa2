"""The request-validating server refuses what strict servers refuse (so that a run completing
through it means something), and accepts what Membrane sends."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from wire_server import anthropic_problems, openai_problems

from membrane import Message, ModelRequest, ToolCall
from membrane.models import to_anthropic_messages, to_openai_messages

CALL = ToolCall("call_1", "Read", {"file_path": "a.txt"})
REQUEST = ModelRequest(
    agent="a",
    run_id="r",
    system="Be brief.",
    messages=(
        Message("user", "go"),
        Message("assistant", "", tool_calls=(CALL,)),
        Message("tool", "text", tool_call_id="call_1", name="Read"),
    ),
    tools=({"name": "Read", "description": "Read.", "input_schema": {"type": "object"}},),
    model="m",
)
ISSUED = {"call_1": "Read"}


def _openai() -> dict[str, Any]:
    return copy.deepcopy(to_openai_messages(REQUEST))


def _anthropic() -> dict[str, Any]:
    return {**copy.deepcopy(to_anthropic_messages(REQUEST)), "max_tokens": 16}


def test_what_membrane_sends_is_accepted_on_both_wires() -> None:
    assert openai_problems(_openai(), ISSUED) == []
    assert anthropic_problems(_anthropic(), ISSUED) == []


OPENAI_BREAKS = {
    "null content beside tool_calls": lambda b: b["messages"][2].update(content=None),
    "a tool message without tool_call_id": lambda b: b["messages"][3].pop("tool_call_id"),
    "a result for no call": lambda b: b["messages"][3].update(tool_call_id="call_9"),
    "a call without a result": lambda b: b["messages"].pop(3),
    "a call id the server never issued": lambda b: b["messages"][2]["tool_calls"][0].update(
        id="call_x"
    ),
    "a renamed call": lambda b: b["messages"][2]["tool_calls"][0]["function"].update(name="read"),
    "arguments that are not an object": lambda b: b["messages"][2]["tool_calls"][0][
        "function"
    ].update(arguments="[1]"),
    "an unknown role": lambda b: b["messages"][1].update(role="robot"),
    "a late system message": lambda b: b["messages"].append({"role": "system", "content": "x"}),
    "stream_options without stream": lambda b: b.update(stream_options={"include_usage": True}),
    "a tool_choice naming no tool": lambda b: b.update(
        tool_choice={"type": "function", "function": {"name": "Grep"}}
    ),
}


@pytest.mark.parametrize("breaks", OPENAI_BREAKS.values(), ids=OPENAI_BREAKS.keys())
def test_the_openai_wire_refuses_what_strict_servers_refuse(breaks: Any) -> None:
    body = _openai()
    breaks(body)
    assert openai_problems(body, ISSUED) != []


ANTHROPIC_BREAKS = {
    "a whitespace-only text block": lambda b: b["messages"][1]["content"].insert(
        0, {"type": "text", "text": " \n"}
    ),
    "an input that is not an object": lambda b: b["messages"][1]["content"][0].update(input=[1]),
    "a result for no tool_use": lambda b: b["messages"][2]["content"][0].update(
        tool_use_id="toolu_9"
    ),
    "a tool_use without a result": lambda b: b["messages"][2].update(
        content=[{"type": "text", "text": "next"}]
    ),
    "a result after text": lambda b: b["messages"][2]["content"].insert(
        0, {"type": "text", "text": "first"}
    ),
    "two user turns in a row": lambda b: b["messages"].insert(
        1, {"role": "user", "content": "again"}
    ),
    "no max_tokens": lambda b: b.pop("max_tokens"),
    "a tool_choice naming no tool": lambda b: b.update(tool_choice={"type": "tool", "name": "X"}),
}


@pytest.mark.parametrize("breaks", ANTHROPIC_BREAKS.values(), ids=ANTHROPIC_BREAKS.keys())
def test_the_anthropic_wire_refuses_what_the_messages_api_refuses(breaks: Any) -> None:
    body = _anthropic()
    breaks(body)
    assert anthropic_problems(body, ISSUED) != []
