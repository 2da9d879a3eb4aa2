"""Model errors say where to look and what is final: the settings entry, provider, base URL and
attempt count; deterministic 4xx answers end at once with the server's message; a 200 whose body
is not JSON and a 409 are retried as transient faults. Real SDKs over loopback HTTP."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from replay import OPEN, ReplayServer, load

from membrane import Message, ModelRequest, SubagentRuntime, SubagentStartRequest
from membrane.config.load import load_settings
from membrane.errors import ModelError, ModelUnavailable
from membrane.models.anthropic import AnthropicModel
from membrane.models.openai import OpenAIModel
from membrane.models.retry import RetryPolicy
from membrane.models.sdk import SdkModel
from membrane.models.specs import ModelRouter

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("close_models")]

REQUEST = ModelRequest(agent="a", run_id="r", system="", messages=(Message("user", "hi"),))


class Sleeps:
    """Records the waits a retry asked for instead of sleeping (no timing in tests)."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def _ok() -> dict[str, Any]:
    return load("openai", "rate_limited_then_ok")[2]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens on it once the socket is closed


def _entry_model(tmp_path: Path, home: Path, url: str, spec: str = "local") -> SdkModel[Any]:
    project = tmp_path / "project"
    (project / ".membrane").mkdir(parents=True, exist_ok=True)
    (project / ".membrane" / "config.toml").write_text(
        f'[models.local]\nprovider = "openai"\nbase_url = "{url}"\nmodel = "smollm2"\n'
        'stream = false\n\n[model_aliases]\nfast = "local"\n'
    )
    router = ModelRouter.from_settings(load_settings(project=project, home=home))
    model = router.bind(spec)
    assert isinstance(model, SdkModel)
    OPEN.append(model)
    return model


@pytest.mark.parametrize(("spec", "named"), [("local", "entry 'local'"), ("fast", "alias 'fast'")])
async def test_an_unreachable_server_names_entry_provider_base_url_and_attempts(
    tmp_path: Path, isolated_home: Path, spec: str, named: str
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    model = _entry_model(tmp_path, isolated_home, url, spec)
    sleeps = Sleeps()
    model.retry = RetryPolicy(max_retries=2, sleep=sleeps)
    with pytest.raises(ModelUnavailable) as caught:
        await model.request(REQUEST)
    message = caught.value.message
    assert message.startswith("openai could not be reached: APIConnectionError")
    assert f"settings {named}" in message and url in message and "3 attempts" in message
    assert "model openai:smollm2" in message
    data = caught.value.data
    assert (data["provider"], data["base_url"], data["attempts"]) == ("openai", url, 3)
    assert data["entry"] == ("entry:local" if spec == "local" else "alias:fast")
    assert len(sleeps.waits) == 2


async def test_credentials_in_a_base_url_never_reach_an_error() -> None:
    with ReplayServer([{"status": 400, "json": {"error": {"message": "no"}}}]) as server:
        url = server.url.replace("http://", "http://user:hunter2secret@") + "/v1"
        model = OpenAIModel("m", base_url=url, stream=False)
        OPEN.append(model)
        with pytest.raises(ModelError) as caught:
            await model.request(REQUEST)
    assert "hunter2secret" not in str(caught.value.to_dict())
    assert "[redacted]@127.0.0.1" in caught.value.message


REFUSALS = {
    "vllm 400": (400, {"object": "error", "message": "bad role 'robot'", "code": 400}),
    "ollama 400": (400, {"error": {"message": "bad role 'robot'", "type": "invalid_request"}}),
    "not found 404": (404, {"error": {"message": "bad role 'robot'", "code": "model_not_found"}}),
    "pydantic 422": (422, {"detail": [{"loc": ["body"], "msg": "bad role 'robot'"}]}),
}


@pytest.mark.parametrize(("status", "body"), REFUSALS.values(), ids=REFUSALS.keys())
async def test_a_deterministic_4xx_is_final_with_the_servers_message(
    status: int, body: dict[str, Any]
) -> None:
    sleeps = Sleeps()
    with ReplayServer([{"status": status, "json": body}, _ok()]) as server:
        model = OpenAIModel("m", base_url=server.url + "/v1", retry=RetryPolicy(sleep=sleeps))
        OPEN.append(model)
        with pytest.raises(ModelError) as caught:
            await model.request(REQUEST)
    assert caught.value.code == "model-error"
    assert caught.value.message.startswith(f"openai answered HTTP {status}: bad role 'robot' (")
    assert "1 attempt)" in caught.value.message
    assert len(server.requests) == 1 and sleeps.waits == []


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    "first",
    [
        {"text": "<html>502 Bad Gateway</html>"},
        {"text": "<html>502 Bad Gateway</html>", "content_type": "application/json"},
        {"status": 409, "json": {"error": {"message": "another request is in flight"}}},
    ],
    ids=["html", "json-that-is-not", "409"],
)
async def test_a_transient_answer_is_retried_then_the_reply_is_used(
    first: dict[str, Any], stream: bool
) -> None:
    sleeps = Sleeps()
    ok = _ok() if not stream else load("openai", "text_stream")[0]
    with ReplayServer([first, ok]) as server:
        model = OpenAIModel(
            "m", base_url=server.url + "/v1", stream=stream, retry=RetryPolicy(sleep=sleeps)
        )
        OPEN.append(model)
        response = await model.request(REQUEST)
    assert response.text and len(server.requests) == 2 and len(sleeps.waits) == 1


async def test_a_refused_request_ends_the_run_as_model_error_naming_where_to_look(
    tmp_path: Path, isolated_home: Path
) -> None:
    project = tmp_path / "project"
    (project / ".membrane" / "agents").mkdir(parents=True)
    (project / ".membrane" / "agents" / "leaf.md").write_text(
        "---\nname: leaf\ndescription: Reads.\ntools: Read\n---\nRead.\n"
    )

    # A server that serves another model than the entry names (a vLLM started for another).
    refusal = {"status": 404, "json": {"message": "model 'smollm2' not found", "code": 404}}
    with ReplayServer([refusal]) as server:
        server.repeat = True
        model = _entry_model(tmp_path, isolated_home, server.url + "/v1")
        async with SubagentRuntime.open(
            project, model=model, state=tmp_path / "state.db"
        ) as runtime:
            result = await runtime.run(SubagentStartRequest("leaf", "Go."))
    assert result.status == "error" and result.error is not None
    assert result.error["code"] == "model-error"
    message = str(result.error["message"])
    assert "model 'smollm2' not found" in message and "settings entry 'local'" in message
    assert len(server.requests) == 1


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_streamed_request_answered_with_a_page_says_it_was_not_a_stream(
    provider: str,
) -> None:
    page = {"text": "<html>502 Bad Gateway</html>"}
    with ReplayServer([page, page]) as server:
        retry = RetryPolicy(max_retries=1, sleep=Sleeps())
        model: SdkModel[Any] = (
            OpenAIModel("m", base_url=server.url + "/v1", retry=retry)
            if provider == "openai"
            else AnthropicModel("m", base_url=server.url, retry=retry)
        )
        OPEN.append(model)
        with pytest.raises(ModelUnavailable) as caught:
            await model.request(REQUEST)
    assert "not a server-sent event stream" in caught.value.message
    assert "2 attempts" in caught.value.message and len(server.requests) == 2
