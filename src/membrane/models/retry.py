"""Bounded retries for model adapters, and the scrubbing that keeps keys out of errors.

Both adapters turn every SDK failure into a ``Failure``: the stable error class, whether a new
attempt may help, and the provider's ``retry-after`` when it sent one. ``with_retries`` then
retries what may help (rate limits, 5xx and overloaded answers, timeouts, dropped connections)
at most ``RetryPolicy.max_retries`` times, waiting what the provider asked for (or an exponential
backoff with full jitter when it asked nothing), and raises the last failure's error after
that. A wait longer than ``max_wait`` is not sat through: the error is raised at once with
``retry_after`` in its data, for the caller to decide.

``redact`` removes secrets (the key itself, and anything shaped like a key) from provider text
before it reaches an error message, an event or a log.
"""

from __future__ import annotations

import email.utils
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import anyio

from membrane.errors import (
    ModelAuthFailed,
    ModelContextExceeded,
    ModelError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnavailable,
)

__all__ = [
    "Failure",
    "RetryPolicy",
    "incomplete_failure",
    "redact",
    "retry_after_seconds",
    "status_failure",
    "transport_error_types",
    "transport_failure",
    "with_retries",
]

T = TypeVar("T")

#: Key-like tokens providers echo back (``sk-...``, ``sk-ant-...``, masked ``sk-ab***yz``).
_KEY_SHAPE = re.compile(r"\b(?:sk|pk|key|rk|api)[-_][A-Za-z0-9*_\-]{4,}", re.IGNORECASE)
_BEARER = re.compile(r"(?i)bearer\s+[A-Za-z0-9._\-*]+")


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every given secret and every key-shaped token replaced by ``[redacted]``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    text = _BEARER.sub("Bearer [redacted]", text)
    return _KEY_SHAPE.sub("[redacted]", text)


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The wait a provider asked for: ``retry-after-ms``, ``retry-after`` (seconds or a date)."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value.strip() else None
        if parsed is None:
            return None
        return max(0.0, parsed.timestamp() - time.time())


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt, classified: raise ``error`` unless ``retryable`` and attempts remain."""

    error: ModelError
    retryable: bool = False
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to retry. ``sleep`` is the waiting function (tests record it).

    A retry waits what the provider asked for (``retry-after``), else a backoff with full
    jitter: a uniformly random wait up to ``base_delay * 2**attempt`` (at most ``max_delay``),
    so children that failed together do not come back together. ``jitter`` draws the fraction
    (tests fix it)."""

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 20.0
    #: A ``retry-after`` longer than this is not waited for: the error is raised at once.
    max_wait: float = 60.0
    sleep: Callable[[float], Awaitable[None]] = field(default=anyio.sleep, compare=False)
    jitter: Callable[[], float] = field(default=random.random, compare=False)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        return float(min(self.max_delay, self.base_delay * (2**attempt))) * self.jitter()


async def with_retries(
    attempt: Callable[[], Awaitable[T]],
    classify: Callable[[Exception], Failure | None],
    policy: RetryPolicy,
) -> T:
    """``await attempt()``, retried per ``policy`` while ``classify`` says a retry may help.

    ``classify`` returns ``None`` for an exception that is not a provider failure (a bug): it
    propagates unchanged. Cancellation is never caught.
    """
    tries = 0
    while True:
        try:
            return await attempt()
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            wait = policy.delay(tries, failure.retry_after)
            if not failure.retryable or tries >= policy.max_retries or wait > policy.max_wait:
                error = failure.error
                error.data["attempts"] = tries + 1
                setattr(error, "attempts", tries + 1)  # noqa: B010 (data doubles as attributes)
                raise error from exc
            tries += 1
            await policy.sleep(wait)


_CONTEXT_WORDS = (
    "context length",
    "context_length",
    "maximum context",
    "context window",
    "prompt is too long",
    "too many tokens",
    "exceeds the context",
)


def status_failure(
    provider: str,
    status: int,
    message: str,
    headers: Mapping[str, str] | None,
    *,
    kind: str | None = None,
    secrets: Iterable[str | None] = (),
) -> Failure:
    """The failure an HTTP error answer stands for; ``kind`` is the body's error code or type."""
    text = redact(f"{provider} answered HTTP {status}: {message}", secrets)
    data: dict[str, object] = {"provider": provider, "status": status}
    low = f"{message} {kind or ''}".lower()
    if status in (401, 403) or kind in ("authentication_error", "permission_error"):
        return Failure(ModelAuthFailed(text, **data))
    if status == 429 and kind != "insufficient_quota":
        after = retry_after_seconds(headers)
        return Failure(ModelRateLimited(text, **data, retry_after=after), True, after)
    if status == 413 or any(word in low for word in _CONTEXT_WORDS):
        return Failure(ModelContextExceeded(text, **data))
    if status == 408:
        return Failure(ModelTimeout(text, **data), True, retry_after_seconds(headers))
    if status >= 500 or status == 409 or kind == "overloaded_error":
        # 409: a conflict with another request in flight, which OpenAI asks to retry.
        return Failure(ModelUnavailable(text, **data), True, retry_after_seconds(headers))
    # Any other 4xx (400, 404, 422, ...) is the server's answer to this very request: sending it
    # again gets the same answer, so it is final, with the server's own message.
    return Failure(ModelError(text, **data))


def transport_failure(provider: str, exc: Exception, *, timeout: bool) -> Failure:
    """A request that got no answer: a timeout, or a connection that failed or was cut."""
    if timeout:
        return Failure(ModelTimeout(f"{provider} did not answer in time", provider=provider), True)
    text = f"{provider} could not be reached: {type(exc).__name__}"
    cause = exc.__cause__ or exc.__context__
    if cause is not None and str(cause):
        text += f" ({redact(str(cause)[:200])})"
    return Failure(ModelUnavailable(text, provider=provider), True)


def transport_error_types() -> tuple[type[Exception], ...]:
    """The HTTP library's transport errors (a dropped connection mid-stream surfaces as one)."""
    found: list[type[Exception]] = []
    for module in ("httpx2", "httpx"):
        try:
            lib = __import__(module)
        except ImportError:
            continue
        found.append(lib.TransportError)
    return tuple(found)


def incomplete_failure(error: ModelError) -> Failure | None:
    """A stream that ended early is a transport failure (retried); other bad bodies are not."""
    if error.data.get("incomplete"):
        return Failure(ModelUnavailable(error.message, **error.data), True)
    return Failure(error)
