"""Every request to an OpenAI-compatible provider carries a ``max_tokens``, so the provider
bounds a reply too: the ``[models.NAME] max_tokens`` setting when given, else 8192 (32768 as
``max_completion_tokens`` for reasoning models); Anthropic keeps its required one. Through the
real SDKs against the validating loopback server (``wire_server``)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from wire_server import WireServer

from membrane.config.load import load_settings
from membrane.models import Message, ModelRequest
from membrane.models.specs import ModelRouter

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(
    agent="a", run_id="r1", system="Be brief.", messages=(Message("user", "go"),)
)


def _settings(home: Path, url: str, entries: str) -> None:
    (home / "config.toml").write_text(entries.replace("URL", url))


async def _sent(server: WireServer, spec: str) -> dict[str, object]:
    router = ModelRouter.from_settings(load_settings(project=None), spec)
    try:
        with anyio.fail_after(30):
            response = await router.request(REQUEST)
    finally:
        await router.aclose()
    assert response.text == "ok"
    assert server.refused == []
    body = server.requests[-1]["body"]
    assert isinstance(body, dict)
    return body


@pytest.mark.parametrize("stream", [True, False])
async def test_an_openai_request_carries_the_default_max_tokens(
    isolated_home: Path, stream: bool
) -> None:
    with WireServer(lambda agent, turn, body: {"text": "ok"}) as server:
        _settings(
            isolated_home,
            server.url,
            '[models.local]\nprovider = "openai"\nmodel = "smollm2"\n'
            f'base_url = "URL/v1"\nstream = {str(stream).lower()}\n',
        )
        body = await _sent(server, "local")
    assert body["max_tokens"] == 8192
    assert "max_completion_tokens" not in body


async def test_the_max_tokens_setting_is_what_an_openai_request_carries(
    isolated_home: Path,
) -> None:
    with WireServer(lambda agent, turn, body: {"text": "ok"}) as server:
        _settings(
            isolated_home,
            server.url,
            '[models.local]\nprovider = "openai"\nmodel = "smollm2"\nbase_url = "URL/v1"\n'
            "max_tokens = 300\n"
            '[models.thinker]\nprovider = "openai"\nmodel = "o4-mini"\nbase_url = "URL/v1"\n',
        )
        set_body = await _sent(server, "local")
        reasoning_body = await _sent(server, "thinker")
    assert set_body["max_tokens"] == 300
    assert reasoning_body["max_completion_tokens"] == 32768
    assert "max_tokens" not in reasoning_body


async def test_an_anthropic_request_keeps_its_required_max_tokens(isolated_home: Path) -> None:
    with WireServer(lambda agent, turn, body: {"text": "ok"}, wire="anthropic") as server:
        _settings(
            isolated_home,
            server.url,
            '[models.claude]\nprovider = "anthropic"\nmodel = "claude-sonnet-4-6"\n'
            'base_url = "URL"\nmax_tokens = 1000\n',
        )
        body = await _sent(server, "claude")
    assert body["max_tokens"] == 1000
