"""``OpenAIModel``: Chat Completions with tools, on the official ``openai`` SDK.

It works against OpenAI and any OpenAI-compatible server (llama.cpp's server, vLLM, Ollama,
LM Studio): point ``base_url`` at it. The SDK is an optional extra (``membrane[openai]``),
imported when the first model is built.

* Replies are streamed (``stream=True``, usage requested with ``stream_options``) and assembled
  by ``OpenAIStream``, so cancelling the calling task closes the connection mid-reply;
  ``stream=False`` asks for the whole body at once. Both give the same ``ModelResponse``.
* ``thinking`` maps to ``reasoning_effort`` (``off`` is ``none``) on reasoning models (``o1``,
  ``o3``, ``o4``, ``gpt-5`` families, or ``reasoning=True``); elsewhere it is dropped and
  the response carries a note saying so.
* ``max_tokens`` is always sent (as ``max_completion_tokens`` to reasoning models): the
  model's or its settings entry's, else 8192 (32768 for reasoning models, whose hidden
  reasoning counts against it).
* ``response_schema`` is sent as ``response_format`` (``json_schema``).
* ``tool_choice`` (when the request offers tools) is sent as ``tool_choice``: ``"auto"``,
  ``"required"``, ``"none"`` or ``{"type": "function", "function": {"name": NAME}}``.
* ``strict_tools=True`` sends each tool with ``strict: true`` and its schema in strict mode's
  form (``membrane.tools.portable.strict_schema``: every property required, the optional ones
  nullable); the ``null`` a model writes for an optional argument is taken out of the call
  before it is validated and run, so the tool sees the argument left out.
* Failures map to the stable codes through ``membrane.models.retry`` and are retried there;
  the SDK's own retries are off. The key is never part of an error.

The key is ``api_key``, else the variable ``api_key_env`` (default ``OPENAI_API_KEY``). With the
default endpoint a missing key is ``model-auth-failed`` at construction, before any request;
with a ``base_url`` (or ``OPENAI_BASE_URL``) a key is optional, as local servers need none.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from membrane.models.base import ModelRequest, ModelResponse
from membrane.models.convert import from_openai_response, to_openai_messages
from membrane.models.sdk import Assembler, SdkModel
from membrane.models.stream import OpenAIStream
from membrane.models.thinking import dropped_note
from membrane.tools.portable import drop_optional_nulls, strict_schema
from membrane.vocabulary import TOOL_CHOICE_MODES

if TYPE_CHECKING:
    from openai import AsyncOpenAI  # noqa: F401  (named in the quoted base class)

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_REASONING_MAX_TOKENS",
    "OpenAIModel",
    "openai_tool_choice",
]

_EFFORT = {"off": "none", "minimal": "minimal", "low": "low", "medium": "medium", "high": "high"}


def openai_tool_choice(choice: str) -> str | dict[str, Any]:
    """A ``ModelRequest.tool_choice`` in Chat Completions' form: ``"auto"``, ``"required"``,
    ``"none"`` or ``{"type": "function", "function": {"name": NAME}}``."""
    if choice in TOOL_CHOICE_MODES:
        return choice
    return {"type": "function", "function": {"name": choice}}


#: The ``max_tokens`` sent when the model or its settings entry names none: a reply is bounded
#: by the provider too, never only by ``max_response_bytes`` and ``timeout``.
DEFAULT_MAX_TOKENS = 8192
#: The default for reasoning models, sent as ``max_completion_tokens``: it counts the hidden
#: reasoning as well, so it is larger.
DEFAULT_REASONING_MAX_TOKENS = 32768


class OpenAIModel(SdkModel["AsyncOpenAI"]):
    """A ``Model`` on Chat Completions. ``model`` is the provider's model id; the key comes
    from ``api_key``, else ``api_key_env`` (default ``OPENAI_API_KEY``)."""

    provider = "openai"
    key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"
    default_base_url = "https://api.openai.com/v1"
    reasoning_models = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)
    client_class = "AsyncOpenAI"
    error_class = "OpenAIError"

    def __init__(self, model: str, *, strict_tools: bool = False, **options: Any) -> None:
        super().__init__(model, **options)
        if self.max_tokens is None:
            self.max_tokens = DEFAULT_REASONING_MAX_TOKENS if self.reasoning else DEFAULT_MAX_TOKENS
        #: Tools are sent in OpenAI's strict mode (``strict: true``).
        self.strict_tools = strict_tools

    async def request(self, request: ModelRequest) -> ModelResponse:
        response = await super().request(request)
        if not (self.strict_tools and request.tools and response.tool_calls):
            return response
        schemas = {
            str(tool["name"]): schema
            for tool in request.tools
            if isinstance(schema := tool["input_schema"], Mapping)
        }
        calls = tuple(
            dataclasses.replace(call, arguments=drop_optional_nulls(call.arguments, schema))
            if (schema := schemas.get(call.name)) is not None
            else call
            for call in response.tool_calls
        )
        return dataclasses.replace(response, tool_calls=calls)

    def body(self, request: ModelRequest) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The request keyword arguments, and the notes on what could not be honoured."""
        body = to_openai_messages(request)
        body["model"] = self.model
        if request.tool_choice is not None and request.tools:
            body["tool_choice"] = openai_tool_choice(request.tool_choice)
        if self.strict_tools and body.get("tools"):
            body["tools"] = [
                {
                    **tool,
                    "function": {
                        **tool["function"],
                        "parameters": strict_schema(tool["function"]["parameters"]),
                        "strict": True,
                    },
                }
                for tool in body["tools"]
            ]
        notes: list[str] = []
        level = request.thinking
        if level is not None:
            if self.reasoning and level in _EFFORT:
                body["reasoning_effort"] = _EFFORT[level]
            elif level != "off":
                notes.append(dropped_note(self.name, level))
        if self.max_tokens is not None:
            key = "max_completion_tokens" if self.reasoning else "max_tokens"
            body[key] = self.max_tokens
        return body, tuple(notes)

    async def _create(self, body: dict[str, Any]) -> Any:
        return await self.client().chat.completions.create(
            **body, stream=True, stream_options={"include_usage": True}
        )

    def _create_raw(self, body: dict[str, Any]) -> AbstractAsyncContextManager[Any]:
        return self.client().chat.completions.with_streaming_response.create(**body)

    def _parse(self, reply: dict[str, Any]) -> ModelResponse:
        return from_openai_response(reply)

    def _assembler(self) -> Assembler:
        return OpenAIStream()

    def _assembled(self, assembler: Assembler) -> ModelResponse:
        response = assembler.response()
        if isinstance(assembler, OpenAIStream) and not assembler.has_usage:
            note = (
                f"{self.name} reported no usage for a streamed reply; set stream = false on "
                "its model entry to have its tokens counted"
            )
            return dataclasses.replace(response, notes=(*response.notes, note))
        return response

    def _error_kind(self, error: Mapping[str, Any]) -> object:
        return error.get("code") or error.get("type")
