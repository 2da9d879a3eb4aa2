"""A delegation on ``PostgresStore``: ``membrane run --state postgresql://...`` in a real
subprocess and the Python API, on the session's private PostgreSQL cluster; ``membrane runs``
and ``membrane show`` read what it stored. A password in the URL never reaches an error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import pytest

from membrane.errors import StoreError
from membrane.lowlevel import PostgresStore
from membrane.runtime import SubagentRuntime, SubagentStartRequest
from membrane.store.location import locate_state
from membrane.testing import ScriptedModel, stored_receipt
from project_support import agent_file

pytestmark = pytest.mark.anyio

#: A bound on each subprocess, not a performance expectation: a hung run fails instead of hanging.
BOUND_SECONDS = 120

SCRIPT = """\
agents:
  lead:
    - tool_calls:
        - name: Task
          arguments: {agent: helper, task: Count the files.}
    - text: The helper counted them.
  helper:
    - text: three files
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    agent_file(root, "lead", allowed_subagents=["helper"])
    agent_file(root, "helper")
    (tmp_path / "script.yaml").write_text(SCRIPT, encoding="utf-8")
    return root


def _membrane() -> Path:
    command = Path(sys.executable).with_name("membrane")
    if not command.exists():
        pytest.skip(f"the membrane console script is not installed beside {sys.executable}")
    return command


def _cli(
    args: list[str], *, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``membrane ARGS`` in a subprocess with a private ``MEMBRANE_HOME``, headless."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMBRANE_")}
    clean.update(
        MEMBRANE_HOME=str(cwd.parent / "home"), MEMBRANE_HEADLESS="1", COLUMNS="200", **(env or {})
    )
    return subprocess.run(
        [str(_membrane()), *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=BOUND_SECONDS,
    )


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_membrane_run_delegates_on_postgres_and_runs_and_show_read_it(
    project: Path, postgres_url: str
) -> None:
    script = project.parent / "script.yaml"
    done = _cli(
        ["run", "lead", "Count the files.", "--state", postgres_url,
         "--model", f"scripted:{script}", "--json"],
        cwd=project,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    published = {e["agent"]: e for e in events if e["kind"] == "published"}
    assert set(published) == {"lead", "helper"}

    listed = _json(_cli(["runs", "--state", postgres_url, "--json"], cwd=project))
    rows = {row["agent"]: row for row in listed["runs"]}
    assert (rows["lead"]["depth"], rows["helper"]["depth"]) == (0, 1)
    assert rows["helper"]["parent_id"] == rows["lead"]["run_id"]
    assert {row["status"] for row in rows.values()} == {"completed"}

    shown = _json(
        _cli(["show", rows["helper"]["run_id"], "--state", postgres_url, "--json"], cwd=project)
    )
    assert shown["run"]["text"] == "three files"
    lead = _json(
        _cli(["show", rows["lead"]["run_id"], "--state", postgres_url, "--json"], cwd=project)
    )
    assert [c["name"] for c in lead["tool_calls"]] == ["Task"]
    assert [child["run_id"] for child in lead["lineage"]] == [rows["helper"]["run_id"]]

    # The environment names the same database for a command given no --state; the project's
    # own SQLite file was never made.
    by_env = _cli(["runs", "--json"], cwd=project, env={"MEMBRANE_STATE_URL": postgres_url})
    assert {row["run_id"] for row in _json(by_env)["runs"]} == {
        row["run_id"] for row in rows.values()
    }
    assert not locate_state(project, home=project.parent / "home").path.exists()


async def test_the_python_api_delegates_on_postgres_with_durable_depth_edges_and_receipts(
    project: Path, postgres_url: str
) -> None:
    model = ScriptedModel(project.parent / "script.yaml")
    async with SubagentRuntime.open(project, model=model, state=postgres_url) as runtime:
        with anyio.fail_after(60):
            result = await runtime.run(
                SubagentStartRequest("lead", "Count the files.", request_id="count-1")
            )
    assert result.text == "The helper counted them."

    with PostgresStore(postgres_url) as store:
        (lead,) = [h for h in store.list_sessions() if h.agent == "lead"]
        (helper,) = store.list_sessions(parent_id=lead.session_id)
        assert (lead.delegation_depth, helper.delegation_depth) == (0, 1)
        assert [(e.child_id, e.status) for e in store.edges()] == [(helper.session_id, "completed")]
        receipt = stored_receipt(store, "count-1")
        assert receipt is not None and receipt.status == "completed"
        assert store.transcript(helper.session_id)[-1]["content"] == "three files"


def _with_password(url: str, password: str, *, database: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username}:{password}@{parts.netloc.rsplit('@', 1)[-1]}"
    return urlunsplit(parts._replace(netloc=netloc, path=f"/{database}"))


def test_a_password_in_the_url_never_reaches_an_error_or_a_log_line(
    project: Path, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cret-Pw-9"
    wrong = _with_password(postgres_url, secret, database="no_such_database")
    caplog.set_level("DEBUG")
    with pytest.raises(StoreError) as refused:
        PostgresStore(wrong, timeout=5)
    assert refused.value.code == "store-error"
    assert secret not in str(refused.value) and secret not in json.dumps(refused.value.data)
    assert "***" in str(refused.value)
    assert secret not in caplog.text

    done = _cli(["runs", "--state", wrong, "--json"], cwd=project)
    assert done.returncode == 3
    assert "store-error" in done.stderr
    assert secret not in done.stdout + done.stderr
