"""``AnthropicModel``: the Messages API with ``tool_use``, on the official ``anthropic`` SDK.

The SDK is an optional extra (``membrane[anthropic]``), imported when the first model is built.

* Replies are streamed and assembled by ``AnthropicStream`` (cancelling the calling task closes
  the connection mid-reply); ``stream=False`` asks for the whole body. Both give the same
  ``ModelResponse``.
* ``thinking`` maps to extended thinking (``budget_tokens`` per level, ``max_tokens`` raised
  above it) on models that have it (Claude 3.7 and the 4 families, or ``reasoning=True``). The
  conversation does not carry thinking blocks back, and the API requires them inside a tool-use
  cycle, so thinking is used on the turns that answer a user message and dropped, with a note,
  on turns that answer tool results. Elsewhere a level is dropped with a note.
* ``response_schema`` is sent as ``output_config.format`` (``json_schema``).
* ``tool_choice`` (when the request offers tools) is sent as ``tool_choice``: ``{"type":
  "auto"}``, ``{"type": "any"}`` for ``required``, ``{"type": "none"}`` or ``{"type": "tool",
  "name": NAME}``.
* ``max_tokens`` (the API requires it) defaults to 8192.
* Failures (``overloaded_error``/529 included) map to the stable codes through
  ``membrane.models.retry``; the SDK's own retries are off. The key is never part of an error.

The key is ``api_key``, else ``api_key_env`` (default ``ANTHROPIC_API_KEY``); a missing key is
``model-auth-failed`` at construction unless a ``base_url`` is given.
"""

from __future__ import annotations

import re
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from membrane.models.base import ModelRequest, ModelResponse
from membrane.models.convert import from_anthropic_response, to_anthropic_messages
from membrane.models.sdk import Assembler, SdkModel
from membrane.models.stream import AnthropicStream
from membrane.models.thinking import ANTHROPIC_BUDGETS, dropped_note
from membrane.vocabulary import TOOL_CHOICE_MODES

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic  # noqa: F401  (named in the quoted base class)

__all__ = ["AnthropicModel", "anthropic_tool_choice"]

DEFAULT_MAX_TOKENS = 8192


def anthropic_tool_choice(choice: str) -> dict[str, str]:
    """A ``ModelRequest.tool_choice`` in the Messages API's form: ``{"type": "auto"}``,
    ``{"type": "any"}`` (``required``), ``{"type": "none"}`` or ``{"type": "tool", "name":
    NAME}``."""
    if choice == "required":
        return {"type": "any"}
    if choice in TOOL_CHOICE_MODES:
        return {"type": choice}
    return {"type": "tool", "name": choice}


class AnthropicModel(SdkModel["AsyncAnthropic"]):
    """A ``Model`` on the Messages API. ``model`` is the provider's model id; the key comes
    from ``api_key``, else ``api_key_env`` (default ``ANTHROPIC_API_KEY``)."""

    provider = "anthropic"
    key_env = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"
    default_base_url = "https://api.anthropic.com"
    reasoning_models = re.compile(
        r"^claude-(3-7|(opus|sonnet|haiku)-4|[a-z]+-[4-9])", re.IGNORECASE
    )
    client_class = "AsyncAnthropic"
    error_class = "AnthropicError"
    default_max_tokens = DEFAULT_MAX_TOKENS

    def body(self, request: ModelRequest) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The request keyword arguments, and the notes on what could not be honoured."""
        body = to_anthropic_messages(request)
        body["model"] = self.model
        body["max_tokens"] = self.max_tokens
        if request.tool_choice is not None and request.tools:
            body["tool_choice"] = anthropic_tool_choice(request.tool_choice)
        notes: list[str] = []
        level = request.thinking
        if level is not None and level != "off":
            budget = ANTHROPIC_BUDGETS.get(level)
            in_tool_cycle = bool(request.messages) and request.messages[-1].role == "tool"
            if not self.reasoning or budget is None:
                notes.append(dropped_note(self.name, level))
            elif in_tool_cycle:
                notes.append(
                    f"thinking={level!r} dropped on this turn: it answers tool results, and "
                    "thinking inside a tool-use cycle needs the earlier thinking blocks"
                )
            else:
                max_tokens = self.max_tokens or DEFAULT_MAX_TOKENS
                body["thinking"] = {"type": "enabled", "budget_tokens": budget}
                body["max_tokens"] = max(max_tokens, budget + DEFAULT_MAX_TOKENS)
        if request.response_schema is not None:
            schema = dict(request.response_schema)
            body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        return body, tuple(notes)

    async def _create(self, body: dict[str, Any]) -> Any:
        return await self.client().messages.create(**body, stream=True)

    def _create_raw(self, body: dict[str, Any]) -> AbstractAsyncContextManager[Any]:
        return self.client().messages.with_streaming_response.create(**body)

    def _parse(self, reply: dict[str, Any]) -> ModelResponse:
        return from_anthropic_response(reply)

    def _assembler(self) -> Assembler:
        return AnthropicStream()
