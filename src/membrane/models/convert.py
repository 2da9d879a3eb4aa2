"""Pure conversions between Membrane's model values and the OpenAI and Anthropic wire shapes.

They show that the ``Model`` protocol fits both tool-calling APIs without change, and they are
what a real adapter sends and reads: no network and no SDK import here.

* ``to_openai_messages``: keyword arguments for Chat Completions (``messages``, ``tools``, ...).
* ``to_anthropic_messages``: keyword arguments for the Messages API (``system``, ``messages``,
  ``tools``, ...).
* ``from_openai_response`` / ``from_anthropic_response``: a response body back to
  ``ModelResponse``. An unparseable body is a ``ModelError``.

A tool result's attachments take each provider's own form (``membrane.models.attachments``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from membrane.errors import ModelError
from membrane.models.arguments import read_arguments
from membrane.models.attachments import (
    anthropic_result_content,
    attachments_from_anthropic,
    attachments_from_openai,
    is_openai_attachments,
    openai_attachment_message,
    tool_runs,
)
from membrane.models.base import Message, ModelRequest, ModelResponse, StopReason, ToolCall, Usage
from membrane.tools.spec import Attachment
from membrane.tools.view import openai_tool

__all__ = [
    "from_anthropic_messages",
    "from_anthropic_response",
    "from_openai_messages",
    "from_openai_response",
    "to_anthropic_messages",
    "to_openai_messages",
]

#: The name under which a structured final answer's schema is sent.
RESPONSE_SCHEMA_NAME = "final_answer"

_OPENAI_STOP: dict[str, StopReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "error",
}
_ANTHROPIC_STOP: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "error",
}


def to_openai_messages(request: ModelRequest) -> dict[str, Any]:
    """The Chat Completions request body for ``request``."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    results: list[Message] = []
    for message, ends_results in tool_runs(request.messages):
        messages.append(_openai_message(message))
        if message.role == "tool":
            results.append(message)
        if ends_results:
            # A tool message holds text only: the run's attachments follow it as user parts.
            attached = openai_attachment_message(results)
            if attached is not None:
                messages.append(attached)
            results = []
    body: dict[str, Any] = {"messages": messages}
    if request.model is not None:
        body["model"] = request.model
    if request.tools:
        # Entries have the ``ToolView.schemas()`` shape, so ``input_schema`` is a mapping.
        tools: tuple[Mapping[str, Any], ...] = request.tools
        body["tools"] = [openai_tool(tool) for tool in tools]
    if request.response_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": RESPONSE_SCHEMA_NAME, "schema": dict(request.response_schema)},
        }
    return body


def _openai_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            # A string, never null: llama.cpp's and vLLM's request models refuse null content.
            "content": message.content,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
                }
                for call in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def to_anthropic_messages(request: ModelRequest) -> dict[str, Any]:
    """The Messages API request body for ``request``.

    Anthropic wants strictly alternating roles and every tool result inside a user turn, so
    consecutive tool results (and user text after them) merge into one user message.
    ``thinking`` is left to the adapter: a thinking budget is provider configuration.
    """
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _anthropic_blocks(message)
        if not blocks:
            continue  # Anthropic refuses empty content; an empty turn carries nothing anyway
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    body: dict[str, Any] = {"messages": messages}
    if request.system:
        body["system"] = request.system
    if request.model is not None:
        body["model"] = request.model
    if request.tools:
        # Entries have the ``ToolView.schemas()`` shape, so ``input_schema`` is a mapping.
        tools: tuple[Mapping[str, Any], ...] = request.tools
        body["tools"] = [
            {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "input_schema": dict(tool["input_schema"]),
            }
            for tool in tools
        ]
    return body


def _anthropic_blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": anthropic_result_content(message),
        }
        if message.is_error:
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = []
    if message.content.strip():  # the API refuses empty and whitespace-only text blocks
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}
        )
    return blocks


def from_openai_messages(body: Mapping[str, Any]) -> tuple[str, tuple[Message, ...]]:
    """The system prompt and messages of a Chat Completions request body (the inverse of
    ``to_openai_messages``). A ``tool`` message gets back its ``name`` from the call it answers;
    ``is_error`` and ``kind`` have no place on this wire and come back as their defaults."""
    try:
        system = ""
        messages: list[Message] = []
        names: dict[str, str] = {}
        for item in body["messages"]:
            role = item["role"]
            if role == "system":
                system = _text(item.get("content"))
            elif role == "tool":
                call_id = item["tool_call_id"]
                content = _text(item.get("content"))
                messages.append(
                    Message("tool", content, tool_call_id=call_id, name=names.get(call_id))
                )
            elif is_openai_attachments(item):
                for call_id, attachments in attachments_from_openai(item).items():
                    _attach(messages, call_id, attachments)
            elif role in ("user", "assistant"):
                calls = tuple(
                    ToolCall(
                        call["id"],
                        call["function"]["name"],
                        _arguments(call["function"]["arguments"]),
                    )
                    for call in item.get("tool_calls") or ()
                )
                names.update((call.id, call.name) for call in calls)
                messages.append(Message(role, _text(item.get("content")), tool_calls=calls))
            else:
                raise ValueError(f"unknown role {role!r}")
        return system, tuple(messages)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelError(f"unexpected OpenAI request shape: {exc!r}", provider="openai") from exc


def from_anthropic_messages(body: Mapping[str, Any]) -> tuple[str, tuple[Message, ...]]:
    """The system prompt and messages of a Messages API request body (the inverse of
    ``to_anthropic_messages``): each block of a merged user turn is one message again, and a
    ``tool_result`` gets back its ``name`` from the ``tool_use`` it answers. ``kind`` has no
    place on this wire and comes back as ``text``."""
    try:
        messages: list[Message] = []
        names: dict[str, str] = {}
        for turn in body["messages"]:
            if turn["role"] == "assistant":
                text = "".join(b["text"] for b in turn["content"] if b["type"] == "text")
                calls = tuple(
                    ToolCall(b["id"], b["name"], dict(b["input"]))
                    for b in turn["content"]
                    if b["type"] == "tool_use"
                )
                names.update((call.id, call.name) for call in calls)
                messages.append(Message("assistant", text, tool_calls=calls))
                continue
            for block in turn["content"]:
                if block["type"] == "tool_result":
                    call_id = block["tool_use_id"]
                    text, attachments = attachments_from_anthropic(block.get("content"))
                    messages.append(
                        Message(
                            "tool",
                            text,
                            tool_call_id=call_id,
                            name=names.get(call_id),
                            is_error=block.get("is_error") is True,
                            attachments=attachments,
                        )
                    )
                else:
                    messages.append(Message("user", _text(block["text"])))
        return _text(body.get("system")), tuple(messages)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelError(
            f"unexpected Anthropic request shape: {exc!r}", provider="anthropic"
        ) from exc


def from_openai_response(body: Mapping[str, Any]) -> ModelResponse:
    """A Chat Completions response body (first choice) as a ``ModelResponse``."""
    try:
        choice = body["choices"][0]
        message = choice["message"]
        calls = _Calls()
        for call in message.get("tool_calls") or ():
            function = call["function"]
            calls.add(call.get("id"), function["name"], function.get("arguments"))
        usage = body.get("usage") or {}
        return ModelResponse(
            text=_text(message.get("content")),
            tool_calls=tuple(calls.calls),
            stop_reason=_OPENAI_STOP.get(choice.get("finish_reason") or "stop", "error"),
            usage=_usage(usage, "prompt_tokens", "completion_tokens"),
            invalid_arguments=calls.invalid,
            response_id=_said(body.get("id")),
            response_model=_said(body.get("model")),
            finish_reason=_said(choice.get("finish_reason")),
        )
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise ModelError(f"unexpected OpenAI response shape: {exc!r}", provider="openai") from exc


def from_anthropic_response(body: Mapping[str, Any]) -> ModelResponse:
    """A Messages API response body as a ``ModelResponse``; thinking blocks are dropped."""
    try:
        texts: list[str] = []
        calls = _Calls()
        for block in body["content"]:
            if block["type"] == "text":
                texts.append(_text(block["text"]))
            elif block["type"] == "tool_use":
                calls.add(block.get("id"), block["name"], block.get("input"))
        usage = body.get("usage") or {}
        return ModelResponse(
            text="".join(texts),
            tool_calls=tuple(calls.calls),
            stop_reason=_ANTHROPIC_STOP.get(body.get("stop_reason") or "end_turn", "error"),
            usage=_usage(usage, "input_tokens", "output_tokens"),
            invalid_arguments=calls.invalid,
            response_id=_said(body.get("id")),
            response_model=_said(body.get("model")),
            finish_reason=_said(body.get("stop_reason")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelError(
            f"unexpected Anthropic response shape: {exc!r}", provider="anthropic"
        ) from exc


class _Calls:
    """The calls of one reply: ids and names kept exactly as the model wrote them (an id is
    made up only when one is missing or repeated), arguments read leniently
    (``read_arguments``), and the problem of each call whose arguments could not be read."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.invalid: dict[str, str] = {}

    def add(self, call_id: object, name: object, raw: object) -> None:
        if not isinstance(name, str):
            raise TypeError(f"a tool call's name must be a string, got {name!r}")
        if not isinstance(call_id, str) or not call_id or call_id in self.ids():
            call_id = f"call_{uuid.uuid4().hex[:24]}"
        arguments, problem = read_arguments("" if raw is None else raw)
        self.calls.append(ToolCall(call_id, name, arguments))
        if problem is not None:
            self.invalid[call_id] = problem

    def ids(self) -> set[str]:
        return {call.id for call in self.calls}


def _attach(messages: list[Message], call_id: str, attachments: tuple[Attachment, ...]) -> None:
    """Put ``attachments`` back on the tool message that answered ``call_id``."""
    for index in range(len(messages) - 1, -1, -1):
        found = messages[index]
        if found.role == "tool" and found.tool_call_id == call_id:
            messages[index] = replace(found, attachments=found.attachments + attachments)
            return
    raise ValueError(f"attachments for {call_id!r}, which no tool message answers")


def _arguments(text: str) -> dict[str, Any]:
    """OpenAI sends arguments as a JSON string; anything but an object is malformed."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"tool call arguments must be a JSON object, got {text!r}")
    return value


def _text(value: object) -> str:
    """Response text: a string, or nothing (``None``); anything else is a malformed body."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"text content must be a string, got {value!r}")
    return value


def _said(value: object) -> str | None:
    """A string the provider reported about its response (an id, a model, a finish reason),
    else ``None``: these only describe the response, so an odd value is dropped, not refused."""
    return value if isinstance(value, str) and value else None


def _usage(usage: object, input_key: str, output_key: str) -> Usage:
    """Token counts: non-negative integers under the provider's own keys.

    OpenAI's ``prompt_tokens`` already include ``prompt_tokens_details.cached_tokens``;
    Anthropic's ``input_tokens`` leave out ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens``, which are added so that ``input_tokens`` means the same
    for both.
    """
    if not isinstance(usage, Mapping):
        raise TypeError(f"usage must be an object, got {usage!r}")
    details = usage.get("prompt_tokens_details") or {}
    if not isinstance(details, Mapping):
        raise TypeError(f"prompt_tokens_details must be an object, got {details!r}")
    counts = [
        usage.get(input_key) or 0,
        usage.get(output_key) or 0,
        details.get("cached_tokens") or usage.get("cache_read_input_tokens") or 0,
        usage.get("cache_creation_input_tokens") or 0,
    ]
    for count in counts:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise TypeError(f"token counts must be non-negative integers, got {count!r}")
    if input_key == "input_tokens":  # Anthropic: cached prompt tokens are counted apart
        counts[0] += counts[2] + counts[3]
    return Usage(*counts)
