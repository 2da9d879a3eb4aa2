"""A loopback HTTP server that replays recorded wire exchanges, for the real SDK clients.

An exchange file (``exchanges/PROVIDER.json``) maps a name to a list of answers, served in order,
one per request:

* ``status`` (default 200), ``headers`` (extra response headers);
* ``json``: a whole JSON body; or ``text``: a body that is not JSON (with ``content_type``,
  default ``text/html``); or ``sse``: a list of server-sent events, each either a JSON
  value (sent as ``data: ...``), the string ``"[DONE]"``, or ``{"event": NAME, "data": VALUE}``;
* ``cut``: after the events, drop the connection without ending the chunked body (a reply cut
  mid-stream);
* ``hold``: after the events, keep the connection open until the client goes away (the test
  then sees ``disconnected`` set).

Every request is recorded (method, path, headers, JSON body) in ``requests``. Streams are sent
with chunked transfer encoding, as real servers do. ``answer_for`` chooses each answer; the
request-validating server in ``wire_server`` computes its answers there instead.
"""

from __future__ import annotations

import json
import select
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from membrane.models.sdk import SdkModel

EXCHANGES = Path(__file__).resolve().parent / "exchanges"
#: The models a test built; the ``close_models`` fixture closes them after the test.
OPEN: list[SdkModel[Any]] = []


def load(provider: str, name: str) -> list[dict[str, Any]]:
    """The answers recorded under ``name`` in ``exchanges/PROVIDER.json``."""
    recorded: dict[str, list[dict[str, Any]]] = json.loads(
        (EXCHANGES / f"{provider}.json").read_text()
    )
    return [dict(answer) for answer in recorded[name]]


class ReplayServer:
    """Serve ``answers`` in order on 127.0.0.1; use as a context manager."""

    def __init__(self, answers: list[dict[str, Any]] | None = None) -> None:
        self.answers: list[dict[str, Any]] = list(answers or [])
        self.requests: list[dict[str, Any]] = []
        self.streamed = threading.Event()
        self.disconnected = threading.Event()
        self._lock = threading.Lock()
        self.repeat = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._quick_ack()

            def _quick_ack(self) -> None:
                # Acknowledge at once: a client that sends headers and body in two writes
                # would otherwise wait out the delayed ACK on every request.
                quick = getattr(socket, "TCP_QUICKACK", None)
                if quick is not None:
                    self.connection.setsockopt(socket.IPPROTO_TCP, quick, 1)

            def do_POST(self) -> None:
                self._quick_ack()
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                with server._lock:
                    request = {
                        "method": "POST",
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                    }
                    server.requests.append(request)
                    answer = server.answer_for(request)
                server._answer(self, answer)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def answer_for(self, request: dict[str, Any]) -> dict[str, Any]:
        """The answer to ``request`` (called under the lock, after it is recorded): the next
        recorded one. A subclass may compute answers instead (``wire_server``)."""
        if not self.answers:
            return {"status": 500, "json": {"error": "no answer"}}
        if self.repeat:
            return self.answers[(len(self.requests) - 1) % len(self.answers)]
        return self.answers.pop(0)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ReplayServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, handler: BaseHTTPRequestHandler, answer: dict[str, Any]) -> None:
        status = int(answer.get("status", 200))
        headers = dict(answer.get("headers") or {})
        if "sse" not in answer:
            if "text" in answer:  # a body that is not JSON (a proxy's error page)
                payload = str(answer["text"]).encode()
                kind = str(answer.get("content_type", "text/html"))
            else:
                payload = json.dumps(answer.get("json", {})).encode()
                kind = "application/json"
            handler.send_response(status)
            handler.send_header("content-type", kind)
            handler.send_header("content-length", str(len(payload)))
            for key, value in headers.items():
                handler.send_header(key, str(value))
            handler.end_headers()
            handler.wfile.write(payload)
            return
        handler.send_response(status)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("transfer-encoding", "chunked")
        for key, value in headers.items():
            handler.send_header(key, str(value))
        handler.end_headers()
        handler.wfile.write(b"".join(_chunk(_event(event)) for event in answer["sse"]))
        handler.wfile.flush()
        self.streamed.set()
        if answer.get("hold"):
            self._hold(handler.connection)
            handler.close_connection = True
            return
        if answer.get("cut"):
            handler.connection.shutdown(socket.SHUT_RDWR)
            handler.close_connection = True
            return
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()

    def _hold(self, conn: socket.socket) -> None:
        """Wait (at most 20 s) until the client closes its end."""
        for _ in range(200):
            readable, _, _ = select.select([conn], [], [], 0.1)
            if readable:
                try:
                    if conn.recv(1, socket.MSG_PEEK) == b"":
                        self.disconnected.set()
                        return
                except OSError:
                    self.disconnected.set()
                    return


def _event(event: Any) -> bytes:
    if event == "[DONE]":
        return b"data: [DONE]\n\n"
    if isinstance(event, dict) and set(event) == {"event", "data"}:
        return f"event: {event['event']}\ndata: {json.dumps(event['data'])}\n\n".encode()
    return f"data: {json.dumps(event)}\n\n".encode()


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"
