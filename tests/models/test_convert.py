"""The model values map onto the OpenAI and Anthropic tool-calling shapes without loss."""

from __future__ import annotations

import json
from typing import Any

import pytest

from membrane.errors import ModelError
from membrane.models import (
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    Usage,
    from_anthropic_response,
    from_openai_response,
    to_anthropic_messages,
    to_openai_messages,
)
from membrane.models.stream import OpenAIStream

GREP = {
    "name": "Grep",
    "description": "Search files.",
    "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}},
}
CALLS = (
    ToolCall(id="c1", name="Grep", arguments={"pattern": "TODO"}),
    ToolCall(id="c2", name="Bash", arguments={"command": "ls"}),
)
CONVERSATION = (
    Message(role="user", content="Earlier work, summarised.", kind="summary"),
    Message(role="user", content="Find the TODOs."),
    Message(role="assistant", content="Searching.", tool_calls=CALLS),
    Message(role="tool", content="a.py:1: TODO", tool_call_id="c1", name="Grep"),
    Message(role="tool", content="not visible", tool_call_id="c2", name="Bash", is_error=True),
    Message(role="user", content="Also check b.py."),
    Message(role="assistant", content="One TODO in a.py."),
)
REQUEST = ModelRequest(
    agent="reviewer",
    run_id="r1",
    system="You review code.",
    messages=CONVERSATION,
    tools=(GREP,),
    model="some-model",
)


def test_openai_body_has_a_system_message_function_tools_and_paired_results() -> None:
    body = to_openai_messages(REQUEST)
    assert body["model"] == "some-model"
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "Grep",
                "description": "Search files.",
                "parameters": GREP["input_schema"],
            },
        }
    ]
    messages = body["messages"]
    assert messages[0] == {"role": "system", "content": "You review code."}
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "assistant",
    ]
    call = messages[3]["tool_calls"][1]
    assert call["id"] == "c2" and call["type"] == "function"
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == (
        "Bash",
        {"command": "ls"},
    )
    assert messages[5] == {"role": "tool", "tool_call_id": "c2", "content": "not visible"}
    assert messages[7] == {"role": "assistant", "content": "One TODO in a.py."}


def test_openai_assistant_turn_with_only_calls_has_empty_string_content() -> None:
    request = ModelRequest(
        agent="a",
        run_id="r",
        system="",
        messages=(Message(role="assistant", tool_calls=CALLS[:1]),),
    )
    body = to_openai_messages(request)
    # Never null: llama.cpp's server answers HTTP 500 to a null content beside tool_calls.
    assert body["messages"][0]["content"] == ""
    assert "tools" not in body and "model" not in body


def test_a_response_schema_becomes_openai_json_schema_response_format() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    request = ModelRequest(agent="a", run_id="r", system="s", messages=(), response_schema=schema)
    body = to_openai_messages(request)
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == schema


def test_anthropic_body_keeps_system_apart_and_groups_tool_results_in_one_user_turn() -> None:
    body = to_anthropic_messages(REQUEST)
    assert body["system"] == "You review code."
    assert body["tools"] == [GREP]
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert [b["text"] for b in messages[0]["content"]] == [
        "Earlier work, summarised.",
        "Find the TODOs.",
    ]
    assert messages[1]["content"] == [
        {"type": "text", "text": "Searching."},
        {"type": "tool_use", "id": "c1", "name": "Grep", "input": {"pattern": "TODO"}},
        {"type": "tool_use", "id": "c2", "name": "Bash", "input": {"command": "ls"}},
    ]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "a.py:1: TODO"},
        {"type": "tool_result", "tool_use_id": "c2", "content": "not visible", "is_error": True},
        {"type": "text", "text": "Also check b.py."},
    ]


def test_anthropic_body_drops_empty_turns_it_would_refuse() -> None:
    request = ModelRequest(
        agent="a",
        run_id="r",
        system="",
        messages=(Message(role="user", content="hi"), Message(role="assistant", content="")),
    )
    body = to_anthropic_messages(request)
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert "system" not in body


def test_an_openai_response_with_tool_calls_parses_back() -> None:
    body = {
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "Grep", "arguments": '{"pattern": "TODO"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3},
    }
    assert from_openai_response(body) == ModelResponse(
        text="",
        tool_calls=CALLS[:1],
        stop_reason="tool_calls",
        usage=Usage(12, 3),
        finish_reason="tool_calls",
    )


@pytest.mark.parametrize(
    ("finish", "expected"),
    [("stop", "stop"), ("length", "length"), ("content_filter", "error"), ("odd", "error")],
)
def test_openai_finish_reasons_map_to_stop_reasons(finish: str, expected: str) -> None:
    body = {"choices": [{"finish_reason": finish, "message": {"content": "x"}}]}
    assert from_openai_response(body).stop_reason == expected


def test_an_anthropic_response_parses_back_without_thinking_blocks() -> None:
    body = {
        "content": [
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "Searching."},
            {"type": "tool_use", "id": "c1", "name": "Grep", "input": {"pattern": "TODO"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 20, "output_tokens": 5},
    }
    assert from_anthropic_response(body) == ModelResponse(
        text="Searching.",
        tool_calls=CALLS[:1],
        stop_reason="tool_calls",
        usage=Usage(20, 5),
        finish_reason="tool_use",
    )


@pytest.mark.parametrize(
    ("stop", "expected"),
    [("end_turn", "stop"), ("max_tokens", "length"), ("refusal", "error")],
)
def test_anthropic_stop_reasons_map_to_stop_reasons(stop: str, expected: str) -> None:
    body = {"content": [{"type": "text", "text": "x"}], "stop_reason": stop}
    assert from_anthropic_response(body).stop_reason == expected


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"choices": []},
        {"choices": [{"message": {"tool_calls": [{"id": "c", "function": {}}]}}]},
        {"choices": [{"message": {"content": 5}}]},
        {"choices": [{"message": {"content": "x"}}], "usage": "lots"},
        {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": -1}},
        {"choices": [{"message": {"content": "x"}}], "usage": {"completion_tokens": 1.5}},
    ],
)
def test_a_malformed_openai_response_is_a_model_error(body: dict[str, Any]) -> None:
    with pytest.raises(ModelError) as info:
        from_openai_response(body)
    assert info.value.data["provider"] == "openai"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"content": [{"type": "text", "text": 5}]},
        {"content": [], "usage": ["many"]},
        {"content": [], "usage": {"input_tokens": True}},
    ],
)
def test_a_malformed_anthropic_response_is_a_model_error(body: dict[str, Any]) -> None:
    with pytest.raises(ModelError) as info:
        from_anthropic_response(body)
    assert info.value.data["provider"] == "anthropic"


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("[", "the arguments are not valid JSON"),
        ("1", "the arguments are a number, not a JSON object"),
        ([1], "the arguments are an array, not a JSON object"),
        ("x", "the arguments are not valid JSON"),
    ],
)
def test_unreadable_arguments_are_an_empty_call_and_a_problem_never_a_failed_reply(
    raw: object, problem: str
) -> None:
    openai = {"id": "c", "function": {"name": "T", "arguments": raw}}
    anthropic = {"type": "tool_use", "id": "c", "name": "T", "input": raw}
    for response in (
        from_openai_response({"choices": [{"message": {"tool_calls": [openai]}}]}),
        from_anthropic_response({"content": [anthropic]}),
    ):
        assert response.tool_calls == (ToolCall("c", "T", {}),)
        assert response.invalid_arguments["c"].startswith(problem)


def test_a_missing_or_repeated_call_id_is_made_up_and_a_given_one_kept_exactly() -> None:
    calls = [
        {"id": "call__0_Read_cmpl-9", "function": {"name": "Read", "arguments": "{}"}},
        {"function": {"name": "Grep", "arguments": "{}"}},
        {"id": "call__0_Read_cmpl-9", "function": {"name": "Read", "arguments": "{}"}},
    ]
    response = from_openai_response({"choices": [{"message": {"tool_calls": calls}}]})
    ids = [call.id for call in response.tool_calls]
    assert ids[0] == "call__0_Read_cmpl-9" and len(set(ids)) == 3
    assert all(call_id.startswith("call_") for call_id in ids)


def test_a_round_trip_through_either_shape_keeps_the_calls() -> None:
    response = ModelResponse(text="t", tool_calls=CALLS, stop_reason="tool_calls")
    request = ModelRequest(agent="a", run_id="r", system="", messages=(response.message(),))
    openai = to_openai_messages(request)["messages"][0]
    back = from_openai_response({"choices": [{"finish_reason": "tool_calls", "message": openai}]})
    anthropic = to_anthropic_messages(request)["messages"][0]
    back2 = from_anthropic_response({"content": anthropic["content"], "stop_reason": "tool_use"})
    assert back.tool_calls == back2.tool_calls == CALLS
    assert back.text == back2.text == "t"


def test_streamed_calls_without_an_index_are_told_apart_by_their_ids() -> None:
    stream = OpenAIStream()
    for call_id, name, piece in [
        ("call_a", "Read", '{"file_path": '),
        (None, None, '"a.txt"}'),
        ("call_b", "Grep", '{"pattern": "x"}'),
    ]:
        fragment: dict[str, Any] = {"function": {"arguments": piece}}
        if call_id:
            fragment.update(id=call_id, type="function")
            fragment["function"]["name"] = name
        stream.feed({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]})
    stream.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    assert stream.response().tool_calls == (
        ToolCall("call_a", "Read", {"file_path": "a.txt"}),
        ToolCall("call_b", "Grep", {"pattern": "x"}),
    )
