"""A model that streams without end is cut off: through the real ``openai`` SDK, a loopback
server streams text chunks until the client goes away; the reply ends with
``model-response-too-large`` once it carried more than the model's ``max_response_bytes``,
instead of growing the process until it is stopped by hand. The limit is a model setting."""

from __future__ import annotations

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
