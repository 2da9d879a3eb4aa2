"""A model that streams without end is cut off: through the real ``openai`` SDK, a loopback
server streams text chunks until the client goes away; the reply ends with
``model-response-too-large`` once it carried more than the model's ``max_response_bytes``,
instead of growing the process until it is stopped by hand. A whole (non-streamed) reply is
read in chunks and cut off the same way once its body passes the limit. The limit is a model
setting."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest

from membrane.config.load import load_settings
from membrane.config.model_names import resolve_spec
from membrane.errors import ModelResponseTooLarge
from membrane.models import Message, ModelRequest
from membrane.models.anthropic import AnthropicModel
from membrane.models.openai import OpenAIModel
from membrane.models.specs import build_model

pytestmark = pytest.mark.anyio

CHUNK = (
    "data: "
    + json.dumps(
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "flood " * 100}}],
        }
    )
    + "\n\n"
).encode()


class _Endless(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    sent: list[int]
    gone: threading.Event

    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            while True:  # never a finish_reason: only the client ends it
                self.wfile.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
                self.wfile.flush()
                self.sent[0] += len(CHUNK)
        except OSError:
            self.gone.set()


@pytest.fixture
def endless() -> Iterator[tuple[str, list[int], threading.Event]]:
    sent, gone = [0], threading.Event()
    handler = type("Handler", (_Endless,), {"sent": sent, "gone": gone})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", sent, gone
    finally:
        server.shutdown()
        server.server_close()


async def test_an_endless_stream_is_cut_off_at_max_response_bytes(
    endless: tuple[str, list[int], threading.Event],
) -> None:
    url, sent, gone = endless
    model = OpenAIModel("m", api_key="sk-test", base_url=url, max_response_bytes=200_000)
    request = ModelRequest(agent="a", run_id="r1", system="", messages=(Message("user", "go"),))
    try:
        with anyio.fail_after(60), pytest.raises(ModelResponseTooLarge) as caught:
            await model.request(request)
    finally:
        await model.aclose()
    assert caught.value.code == "model-response-too-large"
    assert caught.value.data["limit"] == 200_000
    # The connection was closed: the server's endless reply stops.
    with anyio.fail_after(60):
        await anyio.to_thread.run_sync(gone.wait)
    assert sent[0] > 200_000


def test_max_response_bytes_is_a_model_setting(tmp_path: Path, isolated_home: Path) -> None:
    config = isolated_home / "config.toml"
    config.write_text(
        '[models.flood]\nprovider = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n'
        "max_response_bytes = 1000\n"
    )
    settings = load_settings(project=None)
    choice = resolve_spec("flood", models=settings.models, aliases=settings.model_aliases)
    model = build_model(choice)
    assert isinstance(model, OpenAIModel) and model.max_response_bytes == 1000


class _Huge(BaseHTTPRequestHandler):
    """Answers every request with one whole JSON reply of about 4 MB (no stream), counting
    the requests it got."""

    protocol_version = "HTTP/1.1"
    requests: list[int]
    body: bytes

    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.requests[0] += 1
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(self.body)


_HUGE_TEXT = "flood " * 700_000
_HUGE = {
    "openai": {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": _HUGE_TEXT},
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    },
    "anthropic": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": _HUGE_TEXT}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_whole_reply_over_max_response_bytes_is_cut_off_and_not_retried(
    provider: str,
) -> None:
    requests = [0]
    body = json.dumps(_HUGE[provider]).encode()
    handler = type("Handler", (_Huge,), {"requests": requests, "body": body})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    model: OpenAIModel | AnthropicModel
    if provider == "openai":
        url = f"http://127.0.0.1:{port}/v1"
        model = OpenAIModel("m", base_url=url, stream=False, max_response_bytes=200_000)
    else:
        url = f"http://127.0.0.1:{port}"
        model = AnthropicModel("m", base_url=url, stream=False, max_response_bytes=200_000)
    request = ModelRequest(agent="a", run_id="r1", system="", messages=(Message("user", "go"),))
    try:
        with anyio.fail_after(60), pytest.raises(ModelResponseTooLarge) as caught:
            await model.request(request)
    finally:
        await model.aclose()
        server.shutdown()
        server.server_close()
    assert len(body) > 4_000_000
    assert caught.value.code == "model-response-too-large"
    assert caught.value.data["limit"] == 200_000
    assert requests[0] == 1  # never retried


async def test_a_whole_reply_within_max_response_bytes_is_read_as_before() -> None:
    requests = [0]
    reply = {**_HUGE["openai"]}
    reply["choices"] = [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
    ]
    handler = type("Handler", (_Huge,), {"requests": requests, "body": json.dumps(reply).encode()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    model = OpenAIModel("m", base_url=url, stream=False, max_response_bytes=200_000)
    request = ModelRequest(agent="a", run_id="r1", system="", messages=(Message("user", "go"),))
    try:
        with anyio.fail_after(60):
            response = await model.request(request)
    finally:
        await model.aclose()
        server.shutdown()
        server.server_close()
    assert response.text == "ok"
    assert response.usage.input_tokens == 1
