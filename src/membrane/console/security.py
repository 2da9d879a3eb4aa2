"""Who may drive the console: the browser that opened the URL it printed, and nothing else.

As Jupyter does, ``membrane console`` prints ``http://127.0.0.1:PORT/?token=T``: a request that
brings ``T`` in the query (or in the cookie the console then sets) is the person who ran the
command. Everything else is refused with ``console-refused`` (HTTP 403) before any page runs:

* ``token``: no token, or a wrong one; the cookie is ``HttpOnly`` and ``SameSite=Strict``, so
  another site's page cannot send it;
* ``host``: a ``Host`` header that is not the console's own address (a DNS-rebinding page
  reaches 127.0.0.1 under a name of its own);
* ``origin``: an ``Origin`` other than the console's own, on any request that brings one;
* ``csrf``: a ``POST`` without the page's CSRF token (a form field ``csrf`` or the
  ``X-CSRF-Token`` header that every page sets on htmx's requests).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any, Final
from urllib.parse import parse_qs

from membrane.errors import ConsoleRefused

__all__ = ["COOKIE", "CSRF_FIELD", "CSRF_HEADER", "HEADERS", "Guard", "GuardMiddleware"]

#: The cookie's name, followed by the console's port: cookies are not kept apart by port, so two
#: consoles on one machine each keep their own.
COOKIE: Final = "membrane_console"
#: On every response: the page runs only its own script (htmx, from the console), connects and
#: posts only to the console, is framed by no other page (a click on it cannot be borrowed),
#: and its URLs go as a referrer to no other site ('no-referrer' would make the browser send
#: ``Origin: null`` with the page's own forms, which the origin check refuses).
HEADERS: Final[tuple[tuple[bytes, bytes], ...]] = (
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        b"img-src 'self' data:; connect-src 'self'; form-action 'self'; "
        b"frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"x-content-type-options", b"nosniff"),
    (b"cache-control", b"no-store"),
)
CSRF_FIELD: Final = "csrf"
CSRF_HEADER: Final = "x-csrf-token"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Guard:
    """The console's secrets and its own addresses. ``token`` is in the printed URL; ``csrf``
    is put in every page and must come back with every ``POST``."""

    port: int
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @property
    def hosts(self) -> frozenset[str]:
        return frozenset({f"127.0.0.1:{self.port}", f"localhost:{self.port}"})

    @property
    def origins(self) -> frozenset[str]:
        return frozenset(f"http://{host}" for host in self.hosts)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}?token={self.token}"

    def check(self, scope: Scope) -> bool:
        """Admit ``scope`` (raise ``ConsoleRefused``); ``True`` when it proved the token in
        its query, so that the response sets the cookie."""
        headers = _headers(scope)
        if headers.get("host") not in self.hosts:
            raise ConsoleRefused("the Host header is not the console's address", reason="host")
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins:
            raise ConsoleRefused(
                "a page of another origin may not drive the console", reason="origin"
            )
        query = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [])
        if query and _same(query[0], self.token):
            return True
        cookie = SimpleCookie(headers.get("cookie", "")).get(self.cookie_name)
        if cookie is None or not _same(cookie.value, self.token):
            raise ConsoleRefused(
                "no console token: open the URL `membrane console` printed", reason="token"
            )
        return False

    def check_csrf(self, presented: str | None) -> None:
        if presented is None or not _same(presented, self.csrf):
            raise ConsoleRefused(
                "the form carries no valid CSRF token: reload the page", reason="csrf"
            )

    @property
    def cookie_name(self) -> str:
        return f"{COOKIE}_{self.port}"

    def cookie_header(self) -> tuple[bytes, bytes]:
        value = f"{self.cookie_name}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        return b"set-cookie", value.encode("latin-1")


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


class GuardMiddleware:
    """Refuses (403, ``console-refused``) every HTTP request ``guard`` does not admit, and
    sets the cookie on the response to a request that proved the token in its URL."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            fresh = self.guard.check(scope)
        except ConsoleRefused as refused:
            await _refuse(send, refused)
            return
        added = [*HEADERS, self.guard.cookie_header()] if fresh else list(HEADERS)

        async def with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *added]
            await send(message)

        await self.app(scope, receive, with_headers)


async def _refuse(send: Send, refused: ConsoleRefused) -> None:
    body = f"{refused.code}: {refused.message}\n".encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"x-membrane-error", refused.code.encode()),
                *HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
