"""Properties: the converters round-trip every Message shape; streamed and whole twins agree."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from membrane import Message, ModelRequest, ModelResponse, ToolCall, Usage
from membrane.models import (
    from_anthropic_messages,
    from_anthropic_response,
    from_openai_messages,
    from_openai_response,
    to_anthropic_messages,
    to_openai_messages,
)
from membrane.models.stream import AnthropicStream, OpenAIStream

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
NONEMPTY = TEXT.filter(lambda t: t != "")
NAMES = st.sampled_from(["Read", "Grep", "Task", "mcp__git__log", "ext_tool"])
JSON_LEAF = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | TEXT
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
ARGS = st.dictionaries(TEXT, JSON, max_size=4)


@st.composite
def conversations(draw: st.DrawFn) -> tuple[Message, ...]:
    """Every shape: user text, assistant text and/or calls, a result (ok or error) per call."""
    out: list[Message] = []
    serial = 0
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["user", "assistant", "calls"]))
        if kind == "user":
            out.append(Message("user", draw(NONEMPTY)))
        elif kind == "assistant":
            out.append(Message("assistant", draw(NONEMPTY)))
        else:
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                serial += 1
                calls.append(ToolCall(f"call_{serial}", draw(NAMES), draw(ARGS)))
            out.append(Message("assistant", draw(TEXT), tool_calls=tuple(calls)))
            for call in calls:
                error = draw(st.booleans())
                result = Message(
                    "tool", draw(TEXT), tool_call_id=call.id, name=call.name, is_error=error
                )
                out.append(result)
    return tuple(out)


@given(conversations(), TEXT)
@settings(max_examples=150, deadline=None)
def test_openai_round_trip(messages: tuple[Message, ...], system: str) -> None:
    request = ModelRequest(agent="a", run_id="r", system=system, messages=messages)
    wire = json.loads(json.dumps(to_openai_messages(request)))
    # The OpenAI tool message has no error flag; everything else comes back.
    expected = tuple(
        Message(m.role, m.content, m.tool_calls, m.tool_call_id, m.name) for m in messages
    )
    assert from_openai_messages(wire) == (system, expected)


@given(conversations(), TEXT)
@settings(max_examples=150, deadline=None)
def test_anthropic_round_trip(messages: tuple[Message, ...], system: str) -> None:
    request = ModelRequest(agent="a", run_id="r", system=system, messages=messages)
    wire = json.loads(json.dumps(to_anthropic_messages(request)))
    roles = [turn["role"] for turn in wire["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles))  # strictly alternating
    # Two assistant messages in a row merge into one turn: their text joins, calls concatenate.
    expected: list[Message] = []
    for m in messages:
        if m.role != "tool" and not m.content.strip():
            if not m.tool_calls:
                continue  # a whitespace-only text block is never sent (the API refuses it)
            m = Message(m.role, "", m.tool_calls)
        if m.role == "assistant" and expected and expected[-1].role == "assistant":
            last = expected.pop()
            m = Message("assistant", last.content + m.content, last.tool_calls + m.tool_calls)
        expected.append(m)
    assert from_anthropic_messages(wire) == (system, tuple(expected))


RESPONSES = st.builds(
    ModelResponse,
    text=TEXT,
    tool_calls=st.lists(st.tuples(NAMES, ARGS), max_size=3).map(
        lambda calls: tuple(ToolCall(f"id{i}", n, a) for i, (n, a) in enumerate(calls))
    ),
    stop_reason=st.sampled_from(["stop", "tool_calls", "length", "error"]),
    usage=st.builds(Usage, st.integers(0, 10**6), st.integers(0, 10**6)),
)
_OPENAI_FINISH = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "length": "length",
    "error": "content_filter",
}
_ANTHROPIC_STOP = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "error": "refusal",
}


def _pieces(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=4)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if text[a:b]]


@given(RESPONSES, st.data())
@settings(max_examples=150, deadline=None)
def test_openai_stream_equals_its_whole_twin(response: ModelResponse, data: st.DataObject) -> None:
    draw = data.draw
    calls = [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
        }
        for c in response.tool_calls
    ]
    usage = {
        "prompt_tokens": response.usage.input_tokens,
        "completion_tokens": response.usage.output_tokens,
    }
    finish = _OPENAI_FINISH[response.stop_reason]
    message: dict[str, Any] = {"role": "assistant", "content": response.text or None}
    if calls:
        message["tool_calls"] = calls
    said = {"id": "chatcmpl-7", "model": "gpt-4o-2024-08-06"}
    choices = [{"index": 0, "message": message, "finish_reason": finish}]
    whole = {**said, "choices": choices, "usage": usage}
    deltas: list[dict[str, Any]] = [{"content": piece} for piece in _pieces(draw, response.text)]
    for index, call in enumerate(calls):
        parts = _pieces(draw, call["function"]["arguments"])
        first = {"index": index, "id": call["id"], "function": {"name": call["function"]["name"]}}
        deltas.append({"tool_calls": [first]})
        deltas.extend(
            {"tool_calls": [{"index": index, "function": {"arguments": p}}]} for p in parts
        )
    stream = OpenAIStream()
    for delta in deltas:
        stream.feed({**said, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    stream.feed({**said, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    stream.feed({**said, "choices": [], "usage": usage})
    # What the provider said of its response comes through both ways too.
    expected = dataclasses.replace(
        response, response_id="chatcmpl-7", response_model=said["model"], finish_reason=finish
    )
    assert stream.response() == from_openai_response(whole) == expected


@given(RESPONSES, st.data())
@settings(max_examples=150, deadline=None)
def test_anthropic_stream_equals_its_whole_twin(
    response: ModelResponse, data: st.DataObject
) -> None:
    draw = data.draw
    content: list[dict[str, Any]] = []
    if response.text:
        content.append({"type": "text", "text": response.text})
    content.extend(
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
        for c in response.tool_calls
    )
    stop = _ANTHROPIC_STOP[response.stop_reason]
    usage = {
        "input_tokens": response.usage.input_tokens,
        "output_tokens": response.usage.output_tokens,
    }
    said = {"id": "msg_7", "model": "claude-sonnet-4-6"}
    whole = {**said, "content": content, "stop_reason": stop, "usage": usage}
    stream = AnthropicStream()
    started = {"usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}
    stream.feed({"type": "message_start", "message": {**said, **started}})
    for index, block in enumerate(content):
        if block["type"] == "text":
            stream.feed(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                }
            )
            for piece in _pieces(draw, block["text"]):
                stream.feed(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    }
                )
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            stream.feed({"type": "content_block_start", "index": index, "content_block": start})
            for piece in _pieces(draw, json.dumps(block["input"])):
                delta = {"type": "input_json_delta", "partial_json": piece}
                stream.feed({"type": "content_block_delta", "index": index, "delta": delta})
        stream.feed({"type": "content_block_stop", "index": index})
    stream.feed(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    stream.feed({"type": "message_stop"})
    expected = dataclasses.replace(
        response, response_id="msg_7", response_model=said["model"], finish_reason=stop
    )
    assert stream.response() == from_anthropic_response(whole) == expected
