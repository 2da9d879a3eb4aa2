"""Assemble streamed replies into the bodies the non-streamed APIs return.

A streamed reply arrives as chunks (OpenAI) or events (Anthropic): text in pieces, each tool
call's arguments as JSON fragments spread over many chunks and, for parallel calls, interleaved
by index. The assemblers here collect them into the very body the same request would have
returned without streaming, and hand it to the converter, so a streamed reply and its
non-streamed twin always give the same ``ModelResponse``.

A stream that ends before the provider said it was finished (no ``finish_reason``, no
``message_stop``: a connection cut mid-reply) is a ``ModelError``, never a short success.
Pure: dicts in, a ``ModelResponse`` out; no SDK import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from membrane.errors import ModelError
from membrane.models.base import ModelResponse
from membrane.models.convert import from_anthropic_response, from_openai_response

__all__ = ["AnthropicStream", "OpenAIStream"]


@dataclass
class _OpenAICall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class OpenAIStream:
    """Chat Completions chunks (``choices[0].delta``) in, one response body out."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, _OpenAICall] = {}
        self._finish: str | None = None
        self._usage: Mapping[str, Any] | None = None
        self._said: dict[str, Any] = {}  # the response's id and model, from its chunks
        self.chunks = 0

    def feed(self, chunk: Mapping[str, Any]) -> None:
        """Take one chunk (the parsed ``data:`` line); ``ModelError`` for a malformed one."""
        self.chunks += 1
        try:
            usage = chunk.get("usage")
            if usage:
                self._usage = usage
            for key in ("id", "model"):
                if chunk.get(key):
                    self._said[key] = chunk[key]
            for choice in chunk.get("choices") or ():
                if choice.get("index", 0) != 0:
                    continue
                delta = choice.get("delta") or {}
                content = delta.get("content")
                if content:
                    if not isinstance(content, str):
                        raise TypeError(f"delta content must be a string, got {content!r}")
                    self._text.append(content)
                for fragment in delta.get("tool_calls") or ():
                    self._fragment(fragment)
                if choice.get("finish_reason"):
                    self._finish = choice["finish_reason"]
        except (AttributeError, TypeError, ValueError) as exc:
            raise ModelError(f"unexpected OpenAI stream chunk: {exc!r}", provider="openai") from exc

    def _fragment(self, fragment: Mapping[str, Any]) -> None:
        """One piece of a call. OpenAI sends the id and name once, then argument pieces; some
        compatible servers repeat the id and the whole name in every piece, or leave out
        ``index`` and tell calls apart by id alone. The id and name are kept exactly."""
        index = fragment.get("index")
        call_id = fragment.get("id") or ""
        if index is None:
            # No index: a new id starts a new call; a piece without an id continues the last.
            last = max(self._calls, default=-1)
            fresh = last < 0 or bool(call_id and self._calls[last].id not in ("", call_id))
            index = last + 1 if fresh else last
        call = self._calls.setdefault(int(index), _OpenAICall())
        if call_id:
            call.id = call_id
        function = fragment.get("function") or {}
        name = function.get("name")
        if name and name != call.name:
            call.name += name
        if function.get("arguments"):
            call.arguments.append(function["arguments"])

    @property
    def finished(self) -> bool:
        return self._finish is not None

    @property
    def has_usage(self) -> bool:
        """Whether the server reported usage (some OpenAI-compatible servers never do when
        streaming)."""
        return self._usage is not None

    def body(self) -> dict[str, Any]:
        """The non-streamed body this stream adds up to."""
        if self._finish is None:
            raise ModelError(
                _unfinished("OpenAI", self.chunks, "no finish_reason"),
                provider="openai",
                chunks=self.chunks,
                incomplete=True,
            )
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
        if self._calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": "".join(call.arguments)},
                }
                for _, call in sorted(self._calls.items())
            ]
        body: dict[str, Any] = {
            **self._said,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish}],
        }
        if self._usage is not None:
            body["usage"] = self._usage
        return body

    def response(self) -> ModelResponse:
        return from_openai_response(self.body())


class AnthropicStream:
    """Messages API stream events in, one message body out."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._usage: dict[str, Any] = {}
        self._stop_reason: str | None = None
        self._said: dict[str, Any] = {}  # the message's id and model, from message_start
        self._stopped = False
        self.events = 0

    def feed(self, event: Mapping[str, Any]) -> None:
        """Take one event (``message_start`` ... ``message_stop``); ``ModelError`` if malformed."""
        self.events += 1
        try:
            kind = event["type"]
            if kind == "message_start":
                started = event["message"]
                self._usage.update(_counts(started.get("usage")))
                self._said = {key: started[key] for key in ("id", "model") if started.get(key)}
            elif kind == "content_block_start":
                block = dict(event["content_block"])
                if block.get("type") == "tool_use":
                    block["input"] = {}
                    self._json[int(event["index"])] = []
                self._blocks[int(event["index"])] = block
            elif kind == "content_block_delta":
                self._delta(int(event["index"]), event["delta"])
            elif kind == "message_delta":
                delta = event.get("delta") or {}
                if delta.get("stop_reason"):
                    self._stop_reason = delta["stop_reason"]
                self._usage.update(_counts(event.get("usage")))
            elif kind == "message_stop":
                self._stopped = True
        except (KeyError, AttributeError, TypeError, ValueError) as exc:
            raise ModelError(
                f"unexpected Anthropic stream event: {exc!r}", provider="anthropic"
            ) from exc

    def _delta(self, index: int, delta: Mapping[str, Any]) -> None:
        block = self._blocks[index]
        kind = delta["type"]
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
        elif kind == "input_json_delta":
            self._json[index].append(delta["partial_json"])
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]

    @property
    def finished(self) -> bool:
        return self._stopped

    def body(self) -> dict[str, Any]:
        """The non-streamed body this stream adds up to."""
        if not self._stopped:
            raise ModelError(
                _unfinished("Anthropic", self.events, "no message_stop"),
                provider="anthropic",
                events=self.events,
                incomplete=True,
            )
        content: list[dict[str, Any]] = []
        for index, block in sorted(self._blocks.items()):
            if block.get("type") == "tool_use":
                # The text as streamed: the converter reads it leniently, and an unreadable
                # one becomes a ``tool-arguments-invalid`` result, not a failed reply.
                block = {**block, "input": "".join(self._json.get(index, ()))}
            content.append(block)
        return {
            **self._said,
            "content": content,
            "stop_reason": self._stop_reason,
            "usage": self._usage,
        }

    def response(self) -> ModelResponse:
        return from_anthropic_response(self.body())


def _counts(usage: object) -> dict[str, Any]:
    """The usage fields an event carries (``message_delta`` repeats only what changed)."""
    if not isinstance(usage, Mapping):
        return {}
    return {key: value for key, value in usage.items() if value is not None}


def _unfinished(provider: str, events: int, missing: str) -> str:
    if events == 0:
        # Nothing parsed as an event: the answer was not a stream (a proxy's page, JSON).
        return (
            f"the {provider} stream held no event: the server answered with a body that is "
            "not a server-sent event stream"
        )
    return f"the {provider} stream ended before the reply was complete ({missing})"
