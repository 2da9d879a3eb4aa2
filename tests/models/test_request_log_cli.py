"""``--log-requests`` (and ``log_requests = true``): each model request and response of a run,
keys redacted, in the project's state folder, printed by ``membrane show RUN_ID --requests``;
in process and through ``membrane serve``, with the real openai SDK over loopback HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from replay import ReplayServer, load

from membrane.cli.app import main
from membrane.server.transport import SocketLock

KEY = "sk-local-1234567abcdef"
TEXT = {
    "json": {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "created": 1764547200,
        "model": "smollm2",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Found none."},
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }
}
SEEKER = "---\nname: seeker\ndescription: Seeks.\ntools: Grep\nmodel: local\n---\nFind markers.\n"


def project_on(tmp_path: Path, url: str, *, setting: bool = False) -> Path:
    project = tmp_path / "project"
    agents = project / ".membrane" / "agents"
    agents.mkdir(parents=True)
    (agents / "seeker.md").write_text(SEEKER)
    (project / ".membrane" / "config.toml").write_text(
        ("log_requests = true\n" if setting else "")
        + f'[models.local]\nprovider = "openai"\nbase_url = "{url}/v1"\nmodel = "smollm2"\n'
        'stream = false\napi_key_env = "LOCAL_KEY"\n'
    )
    return project


def result_of(out: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    assert result["kind"] == "result", out
    return result


def check_log(home: Path, project: Path, run_id: str, logged: list[dict[str, Any]]) -> None:
    """Two requests, as sent, with what came back; the key nowhere; the file out of the
    checkout, beside the run's state."""
    [log] = list((home / "projects").glob(f"*/requests/{run_id}.jsonl"))
    assert (log.parent.parent / "state.db").exists()
    assert not list(project.rglob("*.jsonl"))
    text = log.read_text()
    assert KEY not in text and "authorization" not in text.lower()
    assert log.stat().st_mode & 0o077 == 0
    first, second = logged
    assert first["model"] == "openai:smollm2" and first["base_url"].endswith("/v1")
    assert first["request"]["model"] == "smollm2"
    assert [tool["function"]["name"] for tool in first["request"]["tools"]] == ["Grep"]
    assert first["response"]["tool_calls"][0]["name"] == "Grep"
    assert second["request"]["messages"][-1]["role"] == "tool"
    assert second["response"]["text"] == "Found none." and second["error"] is None


def test_run_log_requests_in_process_and_show_prints_them(
    tmp_path: Path,
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("LOCAL_KEY", KEY)
    with ReplayServer([*load("openai", "tool_call"), TEXT]) as server:
        project = project_on(tmp_path, server.url)
        args = ["run", "seeker", "go", "--project", str(project), "--json", "--log-requests"]
        assert main(args) == 0
    run_id = result_of(capsys.readouterr().out)["run_id"]
    show = ["show", run_id, "--project", str(project), "--requests"]
    assert main([*show, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    check_log(isolated_home, project, run_id, document["requests"])
    assert main(show) == 0
    text = capsys.readouterr().out
    assert "#1 openai:smollm2" in text and "#2 openai:smollm2" in text and "Found none." in text


def test_the_setting_logs_without_the_flag_and_nothing_is_logged_by_default(
    tmp_path: Path,
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("LOCAL_KEY", KEY)
    with ReplayServer([*load("openai", "tool_call"), TEXT]) as server:
        project = project_on(tmp_path, server.url, setting=True)
        assert main(["run", "seeker", "go", "--project", str(project), "--json"]) == 0
    run_id = result_of(capsys.readouterr().out)["run_id"]
    assert main(["show", run_id, "--project", str(project), "--requests", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["requests"]) == 2

    quiet = tmp_path / "quiet"
    quiet.mkdir()
    with ReplayServer([*load("openai", "tool_call"), TEXT]) as server:
        project = project_on(quiet, server.url)
        assert main(["run", "seeker", "go", "--project", str(project), "--json"]) == 0
    run_id = result_of(capsys.readouterr().out)["run_id"]
    assert main(["show", run_id, "--project", str(project), "--requests"]) == 0
    assert "no requests were logged" in capsys.readouterr().out


@pytest.fixture
def served_home(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A private home and socket; the runtime the test's command started is stopped after."""
    home, socket = tmp_path / "home", tmp_path / "sock" / "m.sock"
    home.mkdir()
    try:
        yield home, socket
    finally:
        pid = SocketLock(socket).holder() if socket.parent.exists() else None
        if pid is not None:
            os.kill(pid, signal.SIGTERM)


def test_run_log_requests_through_membrane_serve(
    tmp_path: Path, served_home: tuple[Path, Path]
) -> None:
    home, socket = served_home
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("MEMBRANE_") and key != "PYTEST_CURRENT_TEST"
    }
    env |= {"MEMBRANE_HOME": str(home), "MEMBRANE_SOCKET": str(socket), "LOCAL_KEY": KEY}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "membrane", *args, "--project", str(project)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    with ReplayServer([*load("openai", "tool_call"), TEXT]) as server:
        project = project_on(tmp_path, server.url)
        done = cli("run", "seeker", "go", "--json", "--log-requests")
        assert done.returncode == 0, done.stderr
    run_id = result_of(done.stdout)["run_id"]
    shown = cli("show", run_id, "--requests", "--json")
    assert shown.returncode == 0, shown.stderr
    check_log(home, project, run_id, json.loads(shown.stdout)["requests"])
