"""``SdkModel``: what the model adapters on an official SDK share (``OpenAIModel``,
``AnthropicModel``).

An adapter names its SDK and says how its wire format looks (the request body, the call, the
stream assembler, the shape of an error body); this class does the rest the same way for both:

* The SDK (an optional extra, ``membrane[<provider>]``) is imported when the first model is
  built; a missing one is ``extra-not-installed``.
* The key is ``api_key``, else the variable ``api_key_env``; the endpoint is ``base_url``, else
  the provider's ``*_BASE_URL`` variable. A missing key is ``model-auth-failed`` at
  construction unless an endpoint is given (local servers need none).
* The client is built on first use with the SDK's own retries off; ``aclose()`` (or leaving
  ``async with``) closes its connections.
* ``request()`` streams the reply into the adapter's assembler (the stream is closed however
  the call ends, so cancelling the caller closes the connection mid-reply) or, with
  ``stream=False``, asks for the whole body; failures are classified into the stable codes of
  ``membrane.models.retry`` and retried there. The notes on what the body could not honour
  lead the response's own notes. The key is never part of an error.
"""

from __future__ import annotations

import dataclasses
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

import anyio

from membrane._extras import require
from membrane.errors import ModelAuthFailed, ModelError
from membrane.models.base import ModelRequest, ModelResponse
from membrane.models.retry import (
    Failure,
    RetryPolicy,
    incomplete_failure,
    status_failure,
    transport_error_types,
    transport_failure,
    with_retries,
)

__all__ = ["Assembler", "SdkModel"]

#: A stand-in key for servers that need none (the SDKs refuse to build a client without one).
NO_KEY = "not-needed"

Client = TypeVar("Client")


class Assembler(Protocol):
    """Builds one ``ModelResponse`` from a streamed reply's events."""

    def feed(self, event: Mapping[str, object], /) -> None: ...

    def response(self) -> ModelResponse: ...


class SdkModel(ABC, Generic[Client]):
    """A ``Model`` on the SDK named ``provider``; ``model`` is the provider's model id."""

    provider: ClassVar[str]
    #: The variable the key is read from when neither ``api_key`` nor ``api_key_env`` is given.
    key_env: ClassVar[str]
    #: The variable the endpoint is read from when no ``base_url`` is given.
    base_url_env: ClassVar[str]
    #: The model ids that take a reasoning level (``reasoning=None`` asks this pattern).
    reasoning_models: ClassVar[re.Pattern[str]]
    #: The SDK's client class and its base error class.
    client_class: ClassVar[str]
    error_class: ClassVar[str]
    default_max_tokens: ClassVar[int | None] = None

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str | None = None,
        base_url: str | None = None,
        stream: bool = True,
        timeout: float = 600.0,
        max_tokens: int | None = None,
        reasoning: bool | None = None,
        retry: RetryPolicy | None = None,
        name: str | None = None,
    ) -> None:
        self._sdk: Any = require(
            self.provider,
            extra=self.provider,
            package=self.provider,
            feature=f"the {self.provider} provider",
        )
        self._transport = transport_error_types()
        self.model = model
        self.name = name or f"{self.provider}:{model}"
        self.base_url = base_url or os.environ.get(self.base_url_env) or None
        env = api_key_env or self.key_env
        key = api_key if api_key is not None else os.environ.get(env) or None
        if key is None and self.base_url is None:
            raise ModelAuthFailed(
                f"no API key for {self.name}: set {env}", provider=self.provider, env=env
            )
        self._key = key or NO_KEY
        self.stream = stream
        self.timeout = timeout
        self.max_tokens = max_tokens or self.default_max_tokens
        self.reasoning = (
            bool(self.reasoning_models.match(model)) if reasoning is None else reasoning
        )
        self.retry = retry or RetryPolicy()
        self._client: Client | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, base_url={self.base_url!r})"

    def client(self) -> Client:
        """The SDK client (built on first use; its own retries are off)."""
        if self._client is None:
            self._client = getattr(self._sdk, self.client_class)(
                api_key=self._key, base_url=self.base_url, max_retries=0, timeout=self.timeout
            )
        return self._client

    async def aclose(self) -> None:
        """Close the client's connections (a new client is built if the model is used again)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()  # type: ignore[attr-defined]  # both SDKs' clients have it

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @abstractmethod
    def body(self, request: ModelRequest) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The request keyword arguments, and the notes on what could not be honoured."""

    async def request(self, request: ModelRequest) -> ModelResponse:
        body, notes = self.body(request)
        attempt = self._streamed if self.stream else self._whole
        response = await with_retries(lambda: attempt(body), self._classify, self.retry)
        if notes:
            return dataclasses.replace(response, notes=(*notes, *response.notes))
        return response

    # -- the wire format, per adapter -------------------------------------------------------

    @abstractmethod
    async def _create(self, body: dict[str, Any], *, stream: bool) -> Any:
        """The SDK call: the reply object, or with ``stream`` its event stream."""

    @abstractmethod
    def _parse(self, reply: dict[str, Any]) -> ModelResponse:
        """The response a whole reply's body gives."""

    @abstractmethod
    def _assembler(self) -> Assembler:
        """A fresh assembler for one streamed reply."""

    def _assembled(self, assembler: Assembler) -> ModelResponse:
        """The response a finished stream gives."""
        return assembler.response()

    def _error_kind(self, error: Mapping[str, Any]) -> object:
        """The error kind an error body's ``error`` object names."""
        return error.get("type")

    # -- shared ------------------------------------------------------------------------------

    async def _whole(self, body: dict[str, Any]) -> ModelResponse:
        reply = await self._create(body, stream=False)
        return self._parse(reply.model_dump(warnings=False))

    async def _streamed(self, body: dict[str, Any]) -> ModelResponse:
        stream = await self._create(body, stream=True)
        assembler = self._assembler()
        try:
            async for event in stream:
                assembler.feed(event.model_dump(warnings=False))
        finally:
            with anyio.CancelScope(shield=True):
                await stream.close()
        return self._assembled(assembler)

    def _classify(self, exc: Exception) -> Failure | None:
        sdk, provider = self._sdk, self.provider
        secrets = (self._key,)
        if isinstance(exc, sdk.APIStatusError):
            error = getattr(exc, "body", None)
            kind = None
            if isinstance(error, dict):
                inner = error.get("error", error)
                kind = self._error_kind(inner) if isinstance(inner, dict) else None
            return status_failure(
                provider,
                exc.status_code,
                str(exc.message),
                exc.response.headers,
                kind=kind if isinstance(kind, str) else None,
                secrets=secrets,
            )
        if isinstance(exc, sdk.APIConnectionError):
            return transport_failure(provider, exc, timeout=isinstance(exc, sdk.APITimeoutError))
        if isinstance(exc, ModelError):
            return incomplete_failure(exc)
        if isinstance(exc, self._transport):
            return transport_failure(provider, exc, timeout="Timeout" in type(exc).__name__)
        if isinstance(exc, getattr(sdk, self.error_class)):
            return status_failure(provider, 0, str(exc), None, secrets=secrets)
        return None
