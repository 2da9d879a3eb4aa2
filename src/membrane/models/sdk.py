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
* Every error ends by saying where to look: the model, the settings entry or alias it came
  from (``entry``), the base URL (credentials in it redacted) and the attempts made.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar
from urllib.parse import urlsplit, urlunsplit

import anyio

from membrane._extras import require
from membrane.errors import (
    ModelAuthFailed,
    ModelError,
    ModelResponseTooLarge,
    ModelTimeout,
    ModelUnavailable,
)
from membrane.models.base import ModelRequest, ModelResponse
from membrane.models.limiter import Lane
from membrane.models.retry import (
    Failure,
    RetryPolicy,
    incomplete_failure,
    redact,
    status_failure,
    transport_error_types,
    transport_failure,
    with_retries,
)
from membrane.models.wire_log import WireLog

__all__ = ["MAX_RESPONSE_BYTES", "STALL_TIMEOUT", "Assembler", "SdkModel"]

#: What one reply may carry by default (``max_response_bytes``): 16 MiB of a stream's strings,
#: or of a whole reply's body.
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
#: How long a stream may stay silent between two events by default (``stall_timeout``).
STALL_TIMEOUT = 120.0

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
    #: The SDK's own endpoint, used when neither is given.
    default_base_url: ClassVar[str]
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
        entry: str | None = None,
        lane: Lane | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        stall_timeout: float = STALL_TIMEOUT,
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
        #: Where the settings named this model (``entry:NAME``, ``alias:NAME``), for errors.
        self.entry = entry
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
        #: What a streamed reply may carry (UTF-8 bytes of its text and tool-call arguments,
        #: and every other string of its events) before it is ``model-response-too-large``.
        self.max_response_bytes = max_response_bytes
        #: The longest silence between two events of a stream before it is ``model-timeout``
        #: (retried): a server that stops sending mid-reply never holds a run for ``timeout``.
        self.stall_timeout = stall_timeout
        self.max_tokens = max_tokens or self.default_max_tokens
        self.reasoning = (
            bool(self.reasoning_models.match(model)) if reasoning is None else reasoning
        )
        self.retry = retry or RetryPolicy()
        #: The deployment's pace, tokens and concurrency for this endpoint
        #: (``membrane.models.limiter``); ``None``: unlimited.
        self.lane = lane
        #: Where each request and what came back are logged (``membrane.models.wire_log``).
        self.request_log: WireLog | None = None
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
        started = time.monotonic()

        async def paced() -> ModelResponse:
            if self.lane is None:
                return await attempt(body)
            async with self.lane.slot():
                return await attempt(body)

        try:
            response = await with_retries(paced, self._limited, self.retry)
        except ModelError as error:
            located = self._located(error)
            self._log(request, body, started, error=located)
            raise located  # noqa: B904  (keeps the cause with_retries chained)
        if self.lane is not None:
            self.lane.spend(response.usage.input_tokens + response.usage.output_tokens)
        if notes:
            response = dataclasses.replace(response, notes=(*notes, *response.notes))
        self._log(request, body, started, response=response)
        return response

    def _log(
        self,
        request: ModelRequest,
        body: dict[str, Any],
        started: float,
        *,
        response: ModelResponse | None = None,
        error: ModelError | None = None,
    ) -> None:
        """One line of the request log, when there is one (keys are redacted there)."""
        if self.request_log is None:
            return
        reply = None
        if response is not None:
            calls = [
                {"id": call.id, "name": call.name, "arguments": call.arguments}
                for call in response.tool_calls
            ]
            reply = {
                "text": response.text,
                "tool_calls": calls,
                "stop_reason": response.stop_reason,
                "usage": response.usage.to_dict(),
                "notes": list(response.notes),
            }
        entry = {
            "at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "run_id": request.run_id,
            "agent": request.agent,
            "model": self.name,
            "provider": self.provider,
            "base_url": self.base_url,
            "stream": self.stream,
            "ms": round((time.monotonic() - started) * 1000),
            "request": body,
            "response": reply,
            "error": None if error is None else {"code": error.code, "message": error.message},
        }
        self.request_log.write(request.run_id, entry, secrets=(self._key,))

    # -- the wire format, per adapter -------------------------------------------------------

    @abstractmethod
    async def _create(self, body: dict[str, Any]) -> Any:
        """The SDK call for a streamed reply: its event stream."""

    @abstractmethod
    def _create_raw(self, body: dict[str, Any]) -> AbstractAsyncContextManager[Any]:
        """The SDK call for a whole reply, as its raw response (``with_streaming_response``):
        entered, it has the status checked and the body still unread (``iter_bytes``)."""

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

    def _located(self, error: ModelError) -> ModelError:
        """``error`` saying where to look: the model, the settings entry or alias it came from,
        the base URL (without any credentials in it) and how many attempts were made."""
        attempts = error.data.get("attempts", 1)
        url = _without_credentials(self.base_url or self.default_base_url)
        where = [f"model {self.name}"]
        if self.entry:
            kind, _, named = self.entry.partition(":")
            where.append(f"settings {kind} {named!r}" if named else f"settings {kind}")
        where.append(f"base URL {url}")
        where.append(f"{attempts} attempt{'' if attempts == 1 else 's'}")
        error.message = f"{error.message} ({', '.join(where)})"
        error.args = (error.message,)
        context = {"provider": self.provider, "model": self.name, "entry": self.entry}
        for key, value in {**context, "base_url": url}.items():
            error.data.setdefault(key, value)
            setattr(error, key, error.data[key])
        return error

    async def _whole(self, body: dict[str, Any]) -> ModelResponse:
        # The body is read in chunks through the SDK's raw response, so a reply larger than
        # ``max_response_bytes`` is cut off there instead of being held whole in memory.
        async with self._create_raw(body) as raw:
            data = bytearray()
            async for chunk in raw.iter_bytes():
                data += chunk
                if len(data) > self.max_response_bytes:
                    raise ModelResponseTooLarge(
                        f"{self.provider} answered with a body of more than "
                        f"{self.max_response_bytes} bytes (max_response_bytes); the reply was "
                        "cut off and the run ends",
                        provider=self.provider,
                        limit=self.max_response_bytes,
                    )
        try:
            reply = json.loads(data)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            # A 200 answer that is not a JSON object (a proxy's page): a transient fault of
            # the way there, not the model's answer.
            text = redact(bytes(data[:200]).decode("utf-8", "replace"), (self._key,))
            raise ModelUnavailable(
                f"{self.provider} answered HTTP 200 with a body that is not JSON: {text!r}",
                provider=self.provider,
                status=200,
            )
        return self._parse(reply)

    async def _streamed(self, body: dict[str, Any]) -> ModelResponse:
        stream = await self._create(body)
        assembler = self._assembler()
        carried = 0
        events = stream.__aiter__()
        try:
            while True:
                with anyio.move_on_after(self.stall_timeout) as silent:
                    try:
                        event = await events.__anext__()
                    except StopAsyncIteration:
                        break
                if silent.cancelled_caught:
                    raise ModelTimeout(
                        f"{self.provider} sent nothing for {self.stall_timeout:g} s in the "
                        "middle of a streamed reply (stall_timeout)",
                        provider=self.provider,
                        stall_timeout=self.stall_timeout,
                    )
                data = event.model_dump(warnings=False)
                carried += _string_bytes(data)
                if carried > self.max_response_bytes:
                    raise ModelResponseTooLarge(
                        f"{self.provider} streamed more than {self.max_response_bytes} bytes of "
                        "text and tool-call arguments in one reply (max_response_bytes); the "
                        "reply was cut off and the run ends",
                        provider=self.provider,
                        limit=self.max_response_bytes,
                    )
                assembler.feed(data)
        finally:
            with anyio.CancelScope(shield=True):
                await stream.close()
        return self._assembled(assembler)

    def _limited(self, exc: Exception) -> Failure | None:
        """``_classify``, and a rate-limited answer pauses the whole lane for its wait."""
        failure = self._classify(exc)
        if (
            failure is not None
            and self.lane is not None
            and failure.error.code == "model-rate-limited"
        ):
            self.lane.pause(self.retry.delay(0, failure.retry_after))
        return failure

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
                _server_message(error) or str(exc.message),
                exc.response.headers,
                kind=kind if isinstance(kind, str) else None,
                secrets=secrets,
            )
        if isinstance(exc, sdk.APIConnectionError):
            return transport_failure(provider, exc, timeout=isinstance(exc, sdk.APITimeoutError))
        if isinstance(exc, (ModelUnavailable, ModelTimeout)):
            return Failure(exc, True)
        if isinstance(exc, ModelError):
            return incomplete_failure(exc)
        if isinstance(exc, json.JSONDecodeError):
            # A 200 answer whose JSON body does not parse: cut or mangled on the way.
            text = f"{provider} answered with a body that is not valid JSON: {exc}"
            return Failure(ModelUnavailable(text, provider=provider, status=200), True)
        if isinstance(exc, self._transport):
            return transport_failure(provider, exc, timeout="Timeout" in type(exc).__name__)
        if isinstance(exc, getattr(sdk, self.error_class)):
            return status_failure(provider, 0, str(exc), None, secrets=secrets)
        return None


def _server_message(body: object) -> str | None:
    """The message an error body carries, in the shapes servers use: ``{"error": {"message"}}``
    (OpenAI, Ollama, llama.cpp, Anthropic), ``{"message"}`` (vLLM), ``{"detail": [...]}``
    (a bare FastAPI/pydantic server's 422)."""
    if not isinstance(body, dict):
        return None
    inner = body.get("error", body)
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        return str(inner["message"])
    if isinstance(inner, str):
        return inner
    detail = body.get("detail")
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list):
        parts = [str(d.get("msg")) for d in detail if isinstance(d, dict) and d.get("msg")]
        return "; ".join(parts) or None
    return None


def _without_credentials(url: str) -> str:
    """``url`` with any ``user:password@`` replaced, so an error never carries a secret."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"[redacted]@{host}"))


def _string_bytes(value: object) -> int:
    """UTF-8 bytes of the strings in a streamed event (what accumulates into the reply)."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, dict):
        return sum(_string_bytes(item) for item in value.values())
    if isinstance(value, list | tuple):
        return sum(_string_bytes(item) for item in value)
    return 0
