"""Tool-result attachments reach the model in each provider's wire form, through the real SDKs."""

from __future__ import annotations

import base64

import pytest
from replay import OPEN, ReplayServer, load

from membrane import Message, ModelRequest, ToolCall
from membrane.models import (
    from_anthropic_messages,
    from_openai_messages,
    to_anthropic_messages,
    to_openai_messages,
)
from membrane.models.anthropic import AnthropicModel
from membrane.models.openai import OpenAIModel
from membrane.tools.spec import Attachment

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("close_models")]

KEY = "sk-test-abcdefgh12345678"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(16)
PDF = b"%PDF-1.4\n% a tiny document\n"
ZIP = b"PK\x03\x04" + bytes(12)
B64 = {name: base64.b64encode(data).decode() for name, data in
       {"png": PNG, "wav": WAV, "pdf": PDF}.items()}  # fmt: skip

SHOT = Message(
    "tool",
    "a screenshot of the page",
    tool_call_id="call_1",
    name="mcp__browser__shot",
    attachments=(Attachment("image/png", PNG), Attachment("application/pdf", PDF, name="a.pdf")),
)
SOUND = Message(
    "tool",
    "",
    tool_call_id="call_2",
    name="mcp__media__record",
    attachments=(Attachment("audio/wav", WAV), Attachment("application/zip", ZIP, name="x.zip")),
)
PLAIN = Message("tool", "no parts here", tool_call_id="call_3", name="Read")
REQUEST = ModelRequest(
    agent="scout",
    run_id="r1",
    system="Be brief.",
    messages=(
        Message("user", "look at the page"),
        Message(
            "assistant",
            "",
            tool_calls=(
                ToolCall("call_1", "mcp__browser__shot", {}),
                ToolCall("call_2", "mcp__media__record", {}),
                ToolCall("call_3", "Read", {"file_path": "a"}),
            ),
        ),
        SHOT,
        SOUND,
        PLAIN,
        Message("user", "and now?"),
    ),
)


async def test_openai_sends_attachments_as_user_parts_after_the_tool_messages() -> None:
    with ReplayServer(load("openai", "tool_call")) as server:
        model = OpenAIModel("gpt-4o", api_key=KEY, base_url=server.url + "/v1", stream=False)
        OPEN.append(model)
        await model.request(REQUEST)
    messages = server.requests[0]["body"]["messages"]
    roles = [m["role"] for m in messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "tool", "user", "user"]
    # The tool messages keep their text only; no bytes are pasted into it.
    assert [m["content"] for m in messages[3:6]] == [
        "a screenshot of the page",
        "",
        "no parts here",
    ]
    parts = messages[6]["content"]
    assert parts[0] == {
        "type": "text",
        "text": "Attachments of tool call call_1 (mcp__browser__shot):",
    }
    assert parts[1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + B64["png"]},
    }
    assert parts[2] == {
        "type": "file",
        "file": {"file_data": "data:application/pdf;base64," + B64["pdf"], "filename": "a.pdf"},
    }
    assert parts[3]["text"] == "Attachments of tool call call_2 (mcp__media__record):"
    assert parts[4] == {"type": "input_audio", "input_audio": {"data": B64["wav"], "format": "wav"}}
    assert parts[5]["type"] == "text"
    assert "application/zip x.zip, 16 bytes" in parts[5]["text"]
    assert len(parts) == 6
    assert messages[7] == {"role": "user", "content": "and now?"}


async def test_anthropic_sends_attachments_as_blocks_inside_the_tool_result() -> None:
    with ReplayServer(load("anthropic", "parallel_whole")) as server:
        model = AnthropicModel("claude-sonnet-4-6", api_key=KEY, base_url=server.url, stream=False)
        OPEN.append(model)
        await model.request(REQUEST)
    turns = server.requests[0]["body"]["messages"]
    results = turns[2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result", "tool_result", "text"]
    assert results[0]["content"] == [
        {"type": "text", "text": "a screenshot of the page"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": B64["png"]},
        },
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": B64["pdf"]},
            "title": "a.pdf",
        },
    ]
    # Anthropic takes no audio part: it is named as left out, never dropped in silence.
    second = results[1]["content"]
    assert [b["type"] for b in second] == ["text", "text"]
    assert "audio/wav" in second[0]["text"] and "left out" in second[0]["text"]
    assert "application/zip x.zip" in second[1]["text"]
    assert results[2]["content"] == "no parts here"


async def test_attachments_round_trip_through_both_wire_forms() -> None:
    supported = (Attachment("image/png", PNG), Attachment("application/pdf", PDF, name="a.pdf"))
    request = ModelRequest(
        agent="a",
        run_id="r",
        system="s",
        messages=(
            Message("assistant", "", tool_calls=(ToolCall("c1", "t", {}), ToolCall("c2", "u", {}))),
            Message("tool", "one", tool_call_id="c1", name="t", attachments=supported),
            Message("tool", "two", tool_call_id="c2", name="u"),
            Message("user", "next"),
        ),
    )
    assert from_openai_messages(to_openai_messages(request))[1] == request.messages
    assert from_anthropic_messages(to_anthropic_messages(request))[1] == request.messages
