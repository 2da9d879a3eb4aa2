"""Fallback models and the allowlist: a definition's ``model: [primary, fallback...]`` and a
settings alias written as a list are tried in order on a failure another model can fix, each
failed attempt a ``model_attempt_failed`` event and the ``usage`` event naming the model that
answered; ``allowed_models`` refuses any other model at resolve time (``model-not-allowed``),
in ``membrane explain`` as at a start. The real ``openai`` SDK talks HTTP to loopback servers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from replay import ReplayServer, load

from membrane import SubagentRuntime, SubagentStartRequest
from membrane.config.load import load_settings
from membrane.errors import ModelNotAllowed
from membrane.models.specs import ModelRouter

pytestmark = [pytest.mark.anyio]

#: What an OpenAI-compatible server answers a conversation longer than its window.
TOO_LONG = {
    "status": 400,
    "json": {"error": {"message": "This model's maximum context length is 8192 tokens"}},
}


def _ok() -> dict[str, Any]:
    return load("openai", "rate_limited_then_ok")[2]


def _project(tmp_path: Path, *, config: str, model: str) -> Path:
    project = tmp_path / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (project / ".membrane" / "config.toml").write_text(config)
    (agents / "worker.md").write_text(
        f"---\nname: worker\ndescription: Works.\nmodel: {model}\n---\nWork.\n"
    )
    return project


def _entries(primary: str, backup: str, extra: str = "") -> str:
    return (
        f'{extra}[models.primary]\nprovider = "openai"\nbase_url = "{primary}/v1"\n'
        'model = "big"\nstream = false\napi_key_env = "FALLBACK_TEST_KEY"\n\n'
        f'[models.backup]\nprovider = "openai"\nbase_url = "{backup}/v1"\n'
        'model = "small"\nstream = false\napi_key_env = "FALLBACK_TEST_KEY"\n'
    )


async def _run(project: Path, home: Path, tmp_path: Path) -> tuple[Any, list[Any]]:
    router = ModelRouter.from_settings(load_settings(project=project, home=home))
    try:
        async with SubagentRuntime.open(
            project, model=router, state=tmp_path / "state.db"
        ) as runtime:
            with anyio.fail_after(60):
                result = await runtime.run(SubagentStartRequest("worker", "Go."))
            events = list(runtime.store.events(session_id=result.run_id))
    finally:
        await router.aclose()
    return result, events


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FALLBACK_TEST_KEY", "sk-test")


async def test_a_definitions_fallback_answers_when_its_first_model_is_out_of_context(
    tmp_path: Path, isolated_home: Path
) -> None:
    with ReplayServer([TOO_LONG]) as first, ReplayServer([_ok()]) as second:
        project = _project(
            tmp_path, config=_entries(first.url, second.url), model="[primary, backup]"
        )
        result, events = await _run(project, isolated_home, tmp_path)
    assert result.status == "completed" and result.text == "done"
    assert len(first.requests) == 1 and len(second.requests) == 1
    assert second.requests[0]["body"]["model"] == "small"
    failed = [e.data for e in events if e.kind == "model_attempt_failed"]
    assert [(f["model"], f["code"]) for f in failed] == [("openai:big", "model-context-exceeded")]
    assert "maximum context length" in failed[0]["message"]
    usage = [e.data for e in events if e.kind == "usage"]
    assert [u["model"] for u in usage] == ["openai:small"]


async def test_a_list_alias_falls_back_and_a_final_failure_names_every_attempt(
    tmp_path: Path, isolated_home: Path
) -> None:
    aliases = '[model_aliases]\nfast = ["primary", "backup"]\n\n'
    with ReplayServer([TOO_LONG]) as first, ReplayServer([TOO_LONG]) as second:
        project = _project(tmp_path, config=_entries(first.url, second.url, aliases), model="fast")
        result, events = await _run(project, isolated_home, tmp_path)
    assert result.status == "error" and result.error is not None
    assert result.error["code"] == "model-context-exceeded"
    attempts = result.error["data"]["attempts"]
    assert [(a["model"], a["code"]) for a in attempts] == [
        ("openai:big", "model-context-exceeded"),
        ("openai:small", "model-context-exceeded"),
    ]
    assert "every model of the chain failed" in str(result.error["message"])
    ended = next(e.data for e in events if e.kind == "error")
    assert "openai:big" in json.dumps(ended) and "openai:small" in json.dumps(ended)
    assert len(first.requests) == 1 and len(second.requests) == 1


async def test_a_request_refused_by_the_server_is_not_retried_on_the_fallback(
    tmp_path: Path, isolated_home: Path
) -> None:
    refused = {"status": 400, "json": {"error": {"message": "bad role 'robot'"}}}
    with ReplayServer([refused]) as first, ReplayServer([_ok()]) as second:
        project = _project(
            tmp_path, config=_entries(first.url, second.url), model="[primary, backup]"
        )
        result, _ = await _run(project, isolated_home, tmp_path)
    assert result.status == "error" and result.error is not None
    assert result.error["code"] == "model-error"
    assert second.requests == []


async def test_allowed_models_refuses_a_fallback_outside_it_before_any_request(
    tmp_path: Path, isolated_home: Path
) -> None:
    allowed = 'allowed_models = ["primary"]\n\n'
    with ReplayServer([_ok()]) as first, ReplayServer([_ok()]) as second:
        project = _project(
            tmp_path, config=_entries(first.url, second.url, allowed), model="[primary, backup]"
        )
        with pytest.raises(ModelNotAllowed) as caught:
            await _run(project, isolated_home, tmp_path)
    assert caught.value.code == "model-not-allowed"
    assert caught.value.data["spec"] == "backup"
    assert caught.value.data["model"] == "openai:small"
    assert first.requests == [] and second.requests == []


def _explain(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "membrane", "explain", "worker", "--top-level",
         "--project", str(project), "--json"],
        cwd=project, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def test_explain_shows_the_fallbacks_and_allowed_models_and_refuses_what_a_start_would(
    tmp_path: Path, isolated_home: Path
) -> None:
    config = _entries(
        "http://127.0.0.1:9", "http://127.0.0.1:9", 'allowed_models = ["primary", "backup"]\n\n'
    )
    project = _project(tmp_path, config=config, model="[primary, backup]")
    done = _explain(project)
    assert done.returncode == 0, done.stderr
    explained = json.loads(done.stdout)
    invocation = explained["invocation"]
    assert invocation["model"]["value"] == "primary"
    assert invocation["fallback_models"] == {"value": ["backup"], "source": "frontmatter"}
    assert explained["settings"]["allowed_models"]["value"] == ["primary", "backup"]

    # A model outside the list: explain refuses it as a start would.
    (project / ".membrane" / "agents" / "worker.md").write_text(
        "---\nname: worker\ndescription: Works.\nmodel: openai:gpt-4o\n---\nWork.\n"
    )
    refused = _explain(project)
    assert refused.returncode != 0
    assert "model-not-allowed" in refused.stdout + refused.stderr
    assert "'openai:gpt-4o'" in refused.stdout + refused.stderr


def test_the_router_refuses_a_default_model_outside_allowed_models(
    tmp_path: Path, isolated_home: Path
) -> None:
    config = _entries(
        "http://127.0.0.1:9", "http://127.0.0.1:9", 'allowed_models = ["primary"]\n\n'
    )
    project = _project(tmp_path, config=config, model="primary")
    settings = load_settings(project=project, home=isolated_home)
    with pytest.raises(ModelNotAllowed) as caught:
        ModelRouter.from_settings(settings, default="openai:gpt-4o")
    assert caught.value.data["model"] == "openai:gpt-4o"


def test_a_name_is_allowed_by_a_listed_name_of_the_same_provider_model_and_base_url() -> None:
    from membrane.config.model_names import check_allowed
    from membrane.config.values import ModelEntry

    local = ModelEntry(provider="openai", model="smollm2", base_url="http://127.0.0.1:8080/v1")
    models = {"local": local}
    check_allowed("sonnet", ["anthropic:claude-sonnet-5-5"], models=models)
    check_allowed("local", ["local"], models=models)
    with pytest.raises(ModelNotAllowed):
        check_allowed("openai:smollm2", ["local"], models=models)  # another base URL
    with pytest.raises(ModelNotAllowed):
        check_allowed("opus", ["anthropic:claude-sonnet-5-5"], models=models)
