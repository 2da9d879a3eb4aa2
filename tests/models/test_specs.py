"""Model specs: resolution, settings entries and aliases, the router and its early refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from replay import ReplayServer, load

from membrane import Message, ModelRequest
from membrane.config.load import load_settings
from membrane.errors import ModelAuthFailed, SettingsError, UnknownModel
from membrane.models.openai import OpenAIModel
from membrane.models.scripted import ScriptedModel
from membrane.models.specs import ModelRouter, resolve_spec

CONFIG = """
default_model = "local"

[models.local]
provider = "openai"
base_url = "{url}"
model = "smollm2"
api_key_env = "LOCAL_KEY"

[model_aliases]
haiku = "anthropic:claude-haiku-4-5"
small = "local"
"""


def settings_with(tmp_path: Path, text: str, url: str = "http://127.0.0.1:9/v1") -> Path:
    project = tmp_path / "project"
    (project / ".membrane").mkdir(parents=True)
    (project / ".membrane" / "config.toml").write_text(text.replace("{url}", url))
    return project


def test_every_spec_form_resolves(tmp_path: Path, isolated_home: Path) -> None:
    settings = load_settings(project=settings_with(tmp_path, CONFIG), home=isolated_home)
    assert settings.default_model == "local"
    router = ModelRouter.from_settings(settings)
    assert router.resolve("openai:gpt-4o").to_dict() == {
        "spec": "openai:gpt-4o",
        "provider": "openai",
        "model": "gpt-4o",
        "via": "spec",
        "base_url": None,
    }
    assert router.resolve("haiku").via == "alias:haiku"
    assert router.resolve("haiku").model == "claude-haiku-4-5"
    small = router.resolve("small")
    assert (small.provider, small.model, small.via) == ("openai", "smollm2", "alias:small")
    assert small.entry.api_key_env == "LOCAL_KEY"
    assert router.resolve("scripted:demo.yaml").provider == "scripted"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("gemini:pro", "unknown provider 'gemini'"),
        ("fable", "known names: haiku, local, small"),
        ("openai:", "not a provider:MODEL spec"),
        ("", "empty"),
    ],
)
def test_unknown_names_are_clear_errors(
    tmp_path: Path, isolated_home: Path, spec: str, words: str
) -> None:
    settings = load_settings(project=settings_with(tmp_path, CONFIG), home=isolated_home)
    with pytest.raises(UnknownModel) as caught:
        ModelRouter.from_settings(settings).bind(spec)
    assert words in caught.value.message
    assert caught.value.code == "unknown-model"


def test_an_alias_to_an_alias_is_refused() -> None:
    with pytest.raises(UnknownModel, match="another alias"):
        resolve_spec("a", aliases={"a": "b", "b": "openai:gpt-4o"})


def test_a_key_in_the_settings_file_is_refused(tmp_path: Path, isolated_home: Path) -> None:
    text = '[models.x]\nprovider = "openai"\nmodel = "m"\napi_key = "sk-live-123456"\n'
    with pytest.raises(SettingsError) as caught:
        load_settings(project=settings_with(tmp_path, text), home=isolated_home)
    assert "api_key_env" in str(caught.value.data["hint"])
    assert "sk-live" not in caught.value.message


@pytest.mark.parametrize(
    "url", ["127.0.0.1:8080/v1", "localhost:8080", "ftp://host/v1", "http://", "http://h:port/v1"]
)
def test_a_base_url_without_scheme_or_host_is_refused_naming_the_entry(
    tmp_path: Path, isolated_home: Path, url: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(project=settings_with(tmp_path, CONFIG, url=url), home=isolated_home)
    assert caught.value.code == "settings-invalid"
    assert "models.local.base_url" in caught.value.message
    assert "http://" in caught.value.message and url in caught.value.message


def test_a_missing_key_is_refused_when_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    router = ModelRouter(None)
    with pytest.raises(ModelAuthFailed) as caught:
        router.bind("anthropic:claude-haiku-4-5")
    assert caught.value.data["env"] == "ANTHROPIC_API_KEY"


@pytest.mark.anyio
async def test_the_router_answers_each_request_with_the_model_its_spec_names(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("default:\n  - text: scripted answer\n")
    monkeypatch.setenv("LOCAL_KEY", "sk-local-0000")
    with ReplayServer(load("openai", "parallel_stream")) as server:
        project = settings_with(tmp_path, CONFIG, url=server.url + "/v1")
        settings = load_settings(project=project, home=isolated_home)
        router = ModelRouter.from_settings(settings, default=f"scripted:{script}")
        base = ModelRequest(agent="a", run_id="r", system="", messages=(Message("user", "hi"),))
        assert (await router.request(base)).text == "scripted answer"
        routed = ModelRequest(
            agent="a", run_id="r2", system="", messages=base.messages, model="small"
        )
        assert (await router.request(routed)).text == "Looking in two places."
        assert isinstance(router.bind("small"), OpenAIModel)
        assert isinstance(router.bind(None), ScriptedModel)
        await router.aclose()
    sent = server.requests[0]
    assert sent["body"]["model"] == "smollm2"
    assert sent["headers"]["authorization"] == "Bearer sk-local-0000"
