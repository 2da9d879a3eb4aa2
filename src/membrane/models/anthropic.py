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
* ``max_tokens`` (the API requires it) defaults to 8192.
* Failures (``overloaded_error``/529 included) map to the stable codes through
  ``membrane.models.retry``; the SDK's own retries are off. The key is never part of an error.

The key is ``api_key``, else ``api_key_env`` (default ``ANTHROPIC_API_KEY``); a missing key is
``model-auth-failed`` at construction unless a ``base_url`` is given.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

import anyio

from membrane.errors import ExtraNotInstalled, ModelAuthFailed, ModelError
from membrane.models.base import ModelRequest, ModelResponse
from membrane.models.convert import from_anthropic_response, to_anthropic_messages
from membrane.models.retry import (
    Failure,
    RetryPolicy,
    incomplete_failure,
    status_failure,
    transport_error_types,
    transport_failure,
    with_retries,
)
from membrane.models.stream import AnthropicStream
from membrane.models.thinking import ANTHROPIC_BUDGETS, dropped_note

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["AnthropicModel"]

_REASONING = re.compile(r"^claude-(3-7|(opus|sonnet|haiku)-4|[a-z]+-[4-9])", re.IGNORECASE)
DEFAULT_MAX_TOKENS = 8192


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise ExtraNotInstalled(
            "the anthropic provider needs the anthropic package: pip install 'membrane[anthropic]'",
            extra="anthropic",
            package="anthropic",
        ) from exc
    return anthropic


class AnthropicModel:
    """A ``Model`` on the Messages API. ``model`` is the provider's model id."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "ANTHROPIC_API_KEY",
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
        self.name = name or f"anthropic:{model}"
        self.base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        key = api_key if api_key is not None else os.environ.get(api_key_env) or None
        if key is None and self.base_url is None:
            raise ModelAuthFailed(
                f"no API key for {self.name}: set {api_key_env}",
                provider="anthropic",
                env=api_key_env,
            )
        self._key = key or "not-needed"
        self.stream = stream
        self.timeout = timeout
        self.max_tokens = max_tokens or DEFAULT_MAX_TOKENS
        self.reasoning = bool(_REASONING.match(model)) if reasoning is None else reasoning
        self.retry = retry or RetryPolicy()
        self._client: AsyncAnthropic | None = None

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r}, base_url={self.base_url!r})"

    def client(self) -> AsyncAnthropic:
        """The SDK client (built on first use; its own retries are off)."""
        if self._client is None:
            self._client = self._sdk.AsyncAnthropic(
                api_key=self._key, base_url=self.base_url, max_retries=0, timeout=self.timeout
            )
        return self._client

    async def aclose(self) -> None:
        """Close the client's connections (a new client is built if the model is used again)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def __aenter__(self) -> AnthropicModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def body(self, request: ModelRequest) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The request keyword arguments, and the notes on what could not be honoured."""
        body = to_anthropic_messages(request)
        body["model"] = self.model
        body["max_tokens"] = self.max_tokens
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
                body["thinking"] = {"type": "enabled", "budget_tokens": budget}
                body["max_tokens"] = max(self.max_tokens, budget + DEFAULT_MAX_TOKENS)
        if request.response_schema is not None:
            schema = dict(request.response_schema)
            body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        return body, tuple(notes)

    async def request(self, request: ModelRequest) -> ModelResponse:
        body, notes = self.body(request)
        attempt = self._streamed if self.stream else self._whole
        response = await with_retries(lambda: attempt(body), self._classify, self.retry)
        if notes:
            return ModelResponse(
                response.text, response.tool_calls, response.stop_reason, response.usage, notes
            )
        return response

    async def _whole(self, body: dict[str, Any]) -> ModelResponse:
        message = await self.client().messages.create(**body)
        return from_anthropic_response(message.model_dump())

    async def _streamed(self, body: dict[str, Any]) -> ModelResponse:
        stream = await self.client().messages.create(**body, stream=True)
        assembler = AnthropicStream()
        try:
            async for event in stream:
                assembler.feed(event.model_dump())
        finally:
            with anyio.CancelScope(shield=True):
                await stream.close()
        return assembler.response()

    def _classify(self, exc: Exception) -> Failure | None:
        sdk = self._sdk
        secrets = (self._key,)
        if isinstance(exc, sdk.APIStatusError):
            body = getattr(exc, "body", None)
            kind = None
            if isinstance(body, dict):
                inner = body.get("error", body)
                kind = inner.get("type") if isinstance(inner, dict) else None
            return status_failure(
                "anthropic",
                exc.status_code,
                str(exc.message),
                exc.response.headers,
                kind=kind if isinstance(kind, str) else None,
                secrets=secrets,
            )
        if isinstance(exc, sdk.APIConnectionError):
            timeout = isinstance(exc, sdk.APITimeoutError)
            return transport_failure("anthropic", exc, timeout=timeout)
        if isinstance(exc, ModelError):
            return incomplete_failure(exc)
        if isinstance(exc, self._transport):
            return transport_failure("anthropic", exc, timeout="Timeout" in type(exc).__name__)
        if isinstance(exc, sdk.AnthropicError):
            return status_failure("anthropic", 0, str(exc), None, secrets=secrets)
        return None
