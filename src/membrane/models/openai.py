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
* ``response_schema`` is sent as ``response_format`` (``json_schema``).
* Failures map to the stable codes through ``membrane.models.retry`` and are retried there;
  the SDK's own retries are off. The key is never part of an error.

The key is ``api_key``, else the variable ``api_key_env`` (default ``OPENAI_API_KEY``). With the
default endpoint a missing key is ``model-auth-failed`` at construction, before any request;
with a ``base_url`` (or ``OPENAI_BASE_URL``) a key is optional, as local servers need none.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import TYPE_CHECKING, Any

import anyio

from membrane.errors import ExtraNotInstalled, ModelAuthFailed, ModelError
from membrane.models.base import ModelRequest, ModelResponse
from membrane.models.convert import from_openai_response, to_openai_messages
from membrane.models.retry import (
    Failure,
    RetryPolicy,
    incomplete_failure,
    status_failure,
    transport_error_types,
    transport_failure,
    with_retries,
)
from membrane.models.stream import OpenAIStream
from membrane.models.thinking import dropped_note

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAIModel"]

_REASONING = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)
_EFFORT = {"off": "none", "minimal": "minimal", "low": "low", "medium": "medium", "high": "high"}
#: A stand-in key for servers that need none (the SDK refuses to build a client without one).
_NO_KEY = "not-needed"


def _sdk() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ExtraNotInstalled(
            "the openai provider needs the openai package: pip install 'membrane[openai]'",
            extra="openai",
            package="openai",
        ) from exc
    return openai


class OpenAIModel:
    """A ``Model`` on Chat Completions. ``model`` is the provider's model id."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        base_url: str | None = None,
        stream: bool = True,
        timeout: float = 600.0,
        max_tokens: int | None = None,
        reasoning: bool | None = None,
        retry: RetryPolicy | None = None,
        name: str | None = None,
    ) -> None:
        self._sdk = _sdk()
        self._transport = transport_error_types()
        self.model = model
        self.name = name or f"openai:{model}"
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key if api_key is not None else os.environ.get(api_key_env) or None
        if key is None and self.base_url is None:
            raise ModelAuthFailed(
                f"no API key for {self.name}: set {api_key_env}",
                provider="openai",
                env=api_key_env,
            )
        self._key = key or _NO_KEY
        self.stream = stream
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.reasoning = bool(_REASONING.match(model)) if reasoning is None else reasoning
        self.retry = retry or RetryPolicy()
        self._client: AsyncOpenAI | None = None

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model!r}, base_url={self.base_url!r})"

    def client(self) -> AsyncOpenAI:
        """The SDK client (built on first use; its own retries are off)."""
        if self._client is None:
            self._client = self._sdk.AsyncOpenAI(
                api_key=self._key, base_url=self.base_url, max_retries=0, timeout=self.timeout
            )
        return self._client

    async def aclose(self) -> None:
        """Close the client's connections (a new client is built if the model is used again)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def __aenter__(self) -> OpenAIModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def body(self, request: ModelRequest) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The request keyword arguments, and the notes on what could not be honoured."""
        body = to_openai_messages(request)
        body["model"] = self.model
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

    async def request(self, request: ModelRequest) -> ModelResponse:
        body, notes = self.body(request)
        attempt = self._streamed if self.stream else self._whole
        response = await with_retries(lambda: attempt(body), self._classify, self.retry)
        if notes:
            return dataclasses.replace(response, notes=(*notes, *response.notes))
        return response

    async def _whole(self, body: dict[str, Any]) -> ModelResponse:
        completion = await self.client().chat.completions.create(**body)
        return from_openai_response(completion.model_dump())

    async def _streamed(self, body: dict[str, Any]) -> ModelResponse:
        stream = await self.client().chat.completions.create(
            **body, stream=True, stream_options={"include_usage": True}
        )
        assembler = OpenAIStream()
        try:
            async for chunk in stream:
                assembler.feed(chunk.model_dump())
        finally:
            with anyio.CancelScope(shield=True):
                await stream.close()
        response = assembler.response()
        if not assembler.has_usage:
            note = (
                f"{self.name} reported no usage for a streamed reply; set stream = false on "
                "its model entry to have its tokens counted"
            )
            return dataclasses.replace(response, notes=(*response.notes, note))
        return response

    def _classify(self, exc: Exception) -> Failure | None:
        sdk = self._sdk
        secrets = (self._key,)
        if isinstance(exc, sdk.APIStatusError):
            error = getattr(exc, "body", None)
            kind = None
            if isinstance(error, dict):
                inner = error.get("error", error)
                kind = inner.get("code") or inner.get("type") if isinstance(inner, dict) else None
            return status_failure(
                "openai",
                exc.status_code,
                str(exc.message),
                exc.response.headers,
                kind=kind if isinstance(kind, str) else None,
                secrets=secrets,
            )
        if isinstance(exc, sdk.APIConnectionError):
            return transport_failure("openai", exc, timeout=isinstance(exc, sdk.APITimeoutError))
        if isinstance(exc, ModelError):
            return incomplete_failure(exc)
        if isinstance(exc, self._transport):
            return transport_failure("openai", exc, timeout="Timeout" in type(exc).__name__)
        if isinstance(exc, sdk.OpenAIError):
            return status_failure("openai", 0, str(exc), None, secrets=secrets)
        return None
