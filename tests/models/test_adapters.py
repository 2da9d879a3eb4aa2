"""OpenAIModel and AnthropicModel: the real SDK clients over real HTTP, against recorded answers."""

from __future__ import annotations

import logging
import sys
from typing import Any

import anyio
import pytest
from replay import OPEN, ReplayServer, load

from membrane import Message, ModelRequest, ModelResponse, ToolCall, Usage
from membrane.errors import (
    ExtraNotInstalled,
    ModelAuthFailed,
    ModelContextExceeded,
    ModelError,
    ModelRateLimited,
    ModelTimeout,
    ModelUnavailable,
)
from membrane.models.anthropic import AnthropicModel
from membrane.models.openai import OpenAIModel
from membrane.models.retry import RetryPolicy

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("close_models")]

KEY = "sk-test-abcdefgh12345678"
GREP = {"name": "Grep", "description": "Search.", "input_schema": {"type": "object"}}
REQUEST = ModelRequest(
    agent="scout",
    run_id="r1",
    system="Be brief.",
    messages=(Message("user", "find the markers"),),
    tools=(GREP,),
)


class Sleeps:
    """Records the waits a retry asked for instead of sleeping (no timing in tests)."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def openai(server: ReplayServer, *, stream: bool = True, **kw: Any) -> OpenAIModel:
    model = OpenAIModel("gpt-4o", api_key=KEY, base_url=server.url + "/v1", stream=stream, **kw)
    OPEN.append(model)
    return model


def anthropic(server: ReplayServer, *, stream: bool = True, **kw: Any) -> AnthropicModel:
    model = AnthropicModel(
        "claude-sonnet-4-6", api_key=KEY, base_url=server.url, stream=stream, **kw
    )
    OPEN.append(model)
    return model


PARALLEL = ModelResponse(
    text="Looking in two places.",
    tool_calls=(
        ToolCall("call_1", "Grep", {"pattern": "TODO", "path": "src"}),
        ToolCall("call_2", "Read", {"path": "README.md"}),
    ),
    stop_reason="tool_calls",
    usage=Usage(200, 40),
    response_id="chatcmpl-2",
    response_model="gpt-4o",
    finish_reason="tool_calls",
)


async def test_openai_tool_call_whole_sends_the_converted_request() -> None:
    with ReplayServer(load("openai", "tool_call")) as server:
        response = await openai(server, stream=False).request(REQUEST)
    assert response.tool_calls == (ToolCall("call_a", "Grep", {"pattern": "TODO"}),)
    assert response.usage == Usage(120, 18, cache_read_tokens=64)
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == f"Bearer {KEY}"
    assert sent["body"]["model"] == "gpt-4o"
    assert sent["body"]["messages"][0] == {"role": "system", "content": "Be brief."}
    assert sent["body"]["tools"][0]["function"]["name"] == "Grep"


async def test_openai_streamed_parallel_fragments_equal_the_whole_twin() -> None:
    with ReplayServer(load("openai", "parallel_stream")) as server:
        streamed = await openai(server).request(REQUEST)
        assert server.requests[0]["body"]["stream"] is True
        assert server.requests[0]["body"]["stream_options"] == {"include_usage": True}
    with ReplayServer(load("openai", "parallel_whole")) as server:
        whole = await openai(server, stream=False).request(REQUEST)
    assert streamed == whole == PARALLEL


async def test_anthropic_streamed_parallel_fragments_equal_the_whole_twin() -> None:
    with ReplayServer(load("anthropic", "parallel_stream")) as server:
        streamed = await anthropic(server).request(REQUEST)
        sent = server.requests[0]
    with ReplayServer(load("anthropic", "parallel_whole")) as server:
        whole = await anthropic(server, stream=False).request(REQUEST)
    expected = ModelResponse(
        PARALLEL.text,
        (
            ToolCall("toolu_1", "Grep", {"pattern": "TODO", "path": "src"}),
            ToolCall("toolu_2", "Read", {"path": "README.md"}),
        ),
        "tool_calls",
        Usage(250, 40, cache_read_tokens=50),
        response_id="msg_2",
        response_model="claude-sonnet-4-6",
        finish_reason="tool_use",
    )
    assert streamed == whole == expected
    assert sent["path"] == "/v1/messages"
    assert KEY in (sent["headers"].get("x-api-key"), sent["headers"].get("authorization", "")[7:])
    assert sent["body"]["system"] == "Be brief."
    assert sent["body"]["max_tokens"] == 8192
    assert sent["body"]["stream"] is True


async def test_rate_limit_honours_retry_after_then_succeeds() -> None:
    sleeps = Sleeps()
    with ReplayServer(load("openai", "rate_limited_then_ok")) as server:
        model = openai(server, retry=RetryPolicy(sleep=sleeps), stream=False)
        response = await model.request(REQUEST)
    assert response.text == "done"
    assert sleeps.waits == [2.0, 1.5]
    assert len(server.requests) == 3


async def test_rate_limit_past_the_bound_is_model_rate_limited_with_retry_after() -> None:
    sleeps = Sleeps()
    with ReplayServer(load("openai", "rate_limited")) as server:
        model = openai(server, retry=RetryPolicy(max_retries=1, sleep=sleeps), stream=False)
        with pytest.raises(ModelRateLimited) as caught:
            await model.request(REQUEST)
    assert caught.value.to_dict()["data"]["retry_after"] == 1.0
    assert caught.value.data["attempts"] == 2
    assert sleeps.waits == [1.0]


async def test_a_retry_after_longer_than_max_wait_is_not_sat_through() -> None:
    sleeps = Sleeps()
    with ReplayServer(load("anthropic", "rate_limited_then_ok")) as server:
        model = anthropic(server, retry=RetryPolicy(max_wait=1.0, sleep=sleeps))
        with pytest.raises(ModelRateLimited) as caught:
            await model.request(REQUEST)
    assert caught.value.data["retry_after"] == 3.0
    assert sleeps.waits == [] and len(server.requests) == 1


@pytest.mark.parametrize("stream", [True, False])
async def test_unauthorized_is_auth_failed_without_retry_and_without_the_key(
    stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    sleeps = Sleeps()
    caplog.set_level(logging.DEBUG)
    with ReplayServer(load("openai", "unauthorized")) as server:
        model = openai(server, retry=RetryPolicy(sleep=sleeps), stream=stream)
        with pytest.raises(ModelAuthFailed) as caught:
            await model.request(REQUEST)
    assert len(server.requests) == 1 and sleeps.waits == []
    text = str(caught.value.to_dict()) + repr(caught.value)
    assert "5678" not in text and KEY not in text
    assert KEY not in caplog.text


async def test_anthropic_unauthorized_is_auth_failed() -> None:
    server = ReplayServer(load("anthropic", "unauthorized"))
    with server, pytest.raises(ModelAuthFailed) as caught:
        await anthropic(server).request(REQUEST)
    assert caught.value.data["status"] == 401
    assert KEY not in str(caught.value)


@pytest.mark.parametrize(
    ("provider", "name"),
    [("openai", "context_exceeded"), ("anthropic", "too_large"), ("anthropic", "prompt_too_long")],
)
async def test_context_overflow_is_model_context_exceeded(provider: str, name: str) -> None:
    with ReplayServer(load(provider, name)) as server:
        model = openai(server) if provider == "openai" else anthropic(server)
        with pytest.raises(ModelContextExceeded):
            await model.request(REQUEST)
    assert len(server.requests) == 1


async def test_overloaded_529_is_retried_then_model_unavailable() -> None:
    sleeps = Sleeps()
    with ReplayServer(load("anthropic", "overloaded")) as server:
        retry = RetryPolicy(max_retries=2, sleep=sleeps, jitter=lambda: 0.5)
        model = anthropic(server, retry=retry)
        with pytest.raises(ModelUnavailable) as caught:
            await model.request(REQUEST)
    assert len(server.requests) == 3
    # Exponential backoff with full jitter when no retry-after is sent: a random fraction
    # (here fixed at one half) of 0.5 s, then of 1 s.
    assert sleeps.waits == [0.25, 0.5]
    assert caught.value.data["status"] == 529


async def test_overloaded_once_then_the_answer() -> None:
    with ReplayServer(load("anthropic", "overloaded_then_ok")) as server:
        model = anthropic(server, retry=RetryPolicy(sleep=Sleeps()), stream=False)
        assert (await model.request(REQUEST)).text == "done"


async def test_openai_5xx_is_model_unavailable() -> None:
    with ReplayServer(load("openai", "unavailable")) as server:
        model = openai(server, retry=RetryPolicy(max_retries=1, sleep=Sleeps()))
        with pytest.raises(ModelUnavailable):
            await model.request(REQUEST)
    assert len(server.requests) == 2


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_reply_cut_mid_stream_is_an_error_never_a_short_success(provider: str) -> None:
    with ReplayServer(load(provider, "cut_mid_stream")) as server:
        retry = RetryPolicy(max_retries=0, sleep=Sleeps())
        model = (
            openai(server, retry=retry) if provider == "openai" else anthropic(server, retry=retry)
        )
        with pytest.raises(ModelUnavailable):
            await model.request(REQUEST)


async def test_anthropic_error_event_mid_stream_is_mapped() -> None:
    with ReplayServer(load("anthropic", "error_mid_stream")) as server:
        model = anthropic(server, retry=RetryPolicy(max_retries=0, sleep=Sleeps()))
        with pytest.raises(ModelError) as caught:
            await model.request(REQUEST)
    assert caught.value.code == "model-unavailable"


async def test_tool_arguments_that_are_not_an_object_are_reported_not_raised() -> None:
    with ReplayServer(load("openai", "malformed")) as server:
        response = await openai(server, stream=False).request(REQUEST)
    assert response.tool_calls == (ToolCall("call_x", "Grep", {}),)
    assert response.invalid_arguments == {"call_x": "the arguments are an array, not a JSON object"}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_cancelling_mid_reply_closes_the_connection(provider: str) -> None:
    with ReplayServer(load(provider, "long_stream_held")) as server:
        model = openai(server) if provider == "openai" else anthropic(server)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(model.request, REQUEST)
                await anyio.to_thread.run_sync(server.streamed.wait)
                group.cancel_scope.cancel()
            await anyio.to_thread.run_sync(server.disconnected.wait, 5.0)
    assert server.disconnected.is_set()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_stream_that_falls_silent_is_a_model_timeout_retried_then_raised(
    provider: str,
) -> None:
    sleeps = Sleeps()
    retry = RetryPolicy(max_retries=1, sleep=sleeps, jitter=lambda: 0.5)
    with ReplayServer(load(provider, "long_stream_held")) as server:
        server.repeat = True
        build = openai if provider == "openai" else anthropic
        model = build(server, retry=retry, stall_timeout=0.2)
        # Without the stall bound the held stream would wait for the SDK's 600 s timeout.
        with anyio.fail_after(10), pytest.raises(ModelTimeout) as caught:
            await model.request(REQUEST)
        await anyio.to_thread.run_sync(server.disconnected.wait, 5.0)
    assert len(server.requests) == 2  # retried once, as a timeout is
    assert caught.value.data["stall_timeout"] == 0.2 and caught.value.data["attempts"] == 2
    assert "stall_timeout" in caught.value.message
    assert server.disconnected.is_set()


async def test_a_missing_key_is_auth_failed_before_any_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with pytest.raises(ModelAuthFailed) as caught:
        OpenAIModel("gpt-4o")
    assert caught.value.data["env"] == "OPENAI_API_KEY"
    with pytest.raises(ModelAuthFailed) as caught:
        AnthropicModel("claude-haiku-4-5", api_key_env="MY_KEY")
    assert caught.value.data == {"provider": "anthropic", "env": "MY_KEY"}


@pytest.mark.parametrize(
    ("adapter", "package"), [(OpenAIModel, "openai"), (AnthropicModel, "anthropic")]
)
async def test_a_missing_sdk_is_extra_not_installed_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, adapter: type[OpenAIModel | AnthropicModel], package: str
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # the import now fails as if not installed
    with pytest.raises(ExtraNotInstalled) as caught:
        adapter("some-model", api_key=KEY)
    assert caught.value.code == "extra-not-installed"
    assert caught.value.data == {"extra": package, "package": package}
    assert f"pip install 'membrane[{package}]'" in caught.value.message


async def test_openai_honours_the_sdk_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with ReplayServer(load("openai", "tool_call")) as server:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        model = OpenAIModel("gpt-4o", stream=False)
        OPEN.append(model)
        response = await model.request(REQUEST)
    assert response.tool_calls[0].name == "Grep"
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"


async def test_thinking_maps_to_reasoning_effort_or_is_dropped_with_a_note() -> None:
    request = ModelRequest(
        agent="a", run_id="r", system="", messages=(Message("user", "hi"),), thinking="high"
    )
    with ReplayServer(load("openai", "rate_limited_then_ok")[2:] * 2) as server:
        reasoning = OpenAIModel("o3-mini", api_key=KEY, base_url=server.url, stream=False)
        plain = OpenAIModel("gpt-4o", api_key=KEY, base_url=server.url, stream=False)
        OPEN.extend((reasoning, plain))
        assert (await reasoning.request(request)).notes == ()
        dropped = await plain.request(request)
    assert server.requests[0]["body"]["reasoning_effort"] == "high"
    assert "reasoning_effort" not in server.requests[1]["body"]
    assert dropped.text == "done" and "no reasoning setting" in dropped.notes[0]


async def test_anthropic_thinking_budget_and_thinking_blocks_dropped() -> None:
    request = ModelRequest(
        agent="a", run_id="r", system="", messages=(Message("user", "hi"),), thinking="medium"
    )
    with ReplayServer(load("anthropic", "thinking_stream")) as server:
        response = await anthropic(server).request(request)
    assert response.text == "42" and response.notes == ()
    sent = server.requests[0]["body"]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 10000}
    assert sent["max_tokens"] > 10000


async def test_structured_output_uses_each_providers_setting() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    request = ModelRequest(
        agent="a", run_id="r", system="", messages=(Message("user", "hi"),), response_schema=schema
    )
    with ReplayServer(load("openai", "rate_limited_then_ok")[2:]) as server:
        await openai(server, stream=False).request(request)
    assert server.requests[0]["body"]["response_format"]["json_schema"]["schema"] == schema
    with ReplayServer(load("anthropic", "rate_limited_then_ok")[1:]) as server:
        await anthropic(server, stream=False).request(request)
    assert server.requests[0]["body"]["output_config"]["format"]["schema"] == schema
