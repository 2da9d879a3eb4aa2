"""``make demo`` end to end: real subprocesses, the real example workspace (copied to a temporary
folder so the repository is never written), the scripted model and a real SQLite store.

What must hold: the out-of-scope call is vetoed, the grandchild start is rejected at the
depth cap, and the children's results reach the lead. These tests read the run's JSON events and
its store, never the wording of what is printed.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from membrane.store.location import locate_state

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"
SCRIPT = EXAMPLES / "scripts" / "demo.yaml"
TASK = "Review the stockroom service: find the open markers and say which ones matter."
#: A bound on each subprocess, not a performance expectation: a hung run fails instead of hanging.
BOUND_SECONDS = 120
#: Left behind by earlier ``make demo`` runs in the repository; a copy starts without them.
_STATE = shutil.ignore_patterns("state.db*", "worktrees", "__pycache__")


def _membrane() -> Path:
    command = Path(sys.executable).with_name("membrane")
    if not command.exists():
        pytest.skip(f"the membrane console script is not installed beside {sys.executable}")
    return command


def _run(args: list[str], *, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """``args`` in a subprocess with a private ``MEMBRANE_HOME`` and no inherited run identity,
    headless as ``make demo`` is (no machine runtime is started)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMBRANE_")}
    env.update(
        MEMBRANE_HOME=str(home), MEMBRANE_HEADLESS="1", COLUMNS="200", PYTHONIOENCODING="utf-8"
    )
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=BOUND_SECONDS
    )


def _rows(database: Path, query: str) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(database)
    try:
        return connection.execute(query).fetchall()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of ``examples/workspace`` without the state of earlier demo runs."""
    copy = tmp_path_factory.mktemp("demo") / "workspace"
    shutil.copytree(EXAMPLES / "workspace", copy, ignore=_STATE)
    return copy


@pytest.fixture(scope="module")
def events(workspace: Path) -> list[dict[str, Any]]:
    """The JSON lines of ``membrane run lead ... --json`` on the copy (the demo's run part).

    Run once for the module: the tests below read one run from different sides.
    """
    home = workspace.parent / "membrane-home"
    home.mkdir()
    done = _run(
        [
            str(_membrane()),
            "run",
            "lead",
            TASK,
            "--project",
            str(workspace),
            "--model",
            f"scripted:{SCRIPT}",
            "--json",
        ],
        cwd=workspace,
        home=home,
    )
    assert done.returncode == 0, done.stderr
    # With --json every line of stdout is one JSON object; anything else fails to parse here.
    return [json.loads(line) for line in done.stdout.splitlines()]


def _published(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["agent"]: e for e in events if e["kind"] == "published"}


def test_the_demo_run_vetoes_the_scouts_out_of_scope_call(events: list[dict[str, Any]]) -> None:
    vetoed = [e for e in events if e["kind"] == "vetoed_call"]
    assert [(e["agent"], e["data"]["name"], e["data"]["code"]) for e in vetoed] == [
        ("scout", "Bash", "tool-not-visible")
    ]
    scout = _published(events)["scout"]
    assert "Bash" not in scout["data"]["tools"]
    refused = [
        e
        for e in events
        if e["kind"] == "tool_result" and e["data"]["id"] == vetoed[0]["data"]["id"]
    ]
    assert [e["data"]["is_error"] for e in refused] == [True]


def test_the_demo_run_rejects_the_grandchild_at_the_depth_cap(
    events: list[dict[str, Any]],
) -> None:
    rejected = [
        e
        for e in events
        if e["kind"] == "tool_result" and e["agent"] == "auditor" and e["data"]["name"] == "Task"
    ]
    assert [(e["data"]["is_error"], e["data"].get("code")) for e in rejected] == [
        (True, "depth-limit-exceeded")
    ]
    published = [e for e in events if e["kind"] == "published"]
    assert sorted((e["agent"], e["data"]["depth"]) for e in published) == [
        ("auditor", 1),
        ("lead", 0),
        ("scout", 1),
    ]
    assert all(e["data"]["depth"] <= 1 for e in published)
    lead = _published(events)["lead"]["run_id"]
    assert {e["parent_id"] for e in published if e["agent"] != "lead"} == {lead}


def test_the_demo_run_delivers_both_childrens_results_to_the_lead(
    events: list[dict[str, Any]],
) -> None:
    published = _published(events)
    ends = {e["agent"]: e for e in events if e["kind"] in ("completed", "error", "stopped")}
    assert {agent: e["kind"] for agent, e in ends.items()} == {
        "scout": "completed",
        "auditor": "completed",
        "lead": "completed",
    }
    lead_id = published["lead"]["run_id"]
    delegations = [
        e
        for e in events
        if e["kind"] == "tool_result" and e["run_id"] == lead_id and e["data"]["name"] == "Task"
    ]
    assert [e["data"]["is_error"] for e in delegations] == [False, False]
    # The two Task calls run side by side; a foreground child's result reaches the lead only
    # after that child has ended, so the n-th result follows the n-th child's end.
    children = sorted(ends[agent]["seq"] for agent in ("scout", "auditor"))
    pairs = zip(children, delegations, strict=True)
    assert [child < result["seq"] for child, result in pairs] == [True, True]
    assert ends["lead"]["seq"] > delegations[1]["seq"]
    result = events[-1]
    assert result["kind"] == "result"
    assert (result["run_id"], result["agent"], result["status"]) == (lead_id, "lead", "completed")
    assert result["text"] == ends["lead"]["data"]["text"]
    assert result["text"].strip()


def test_the_demo_run_is_durable_in_the_projects_store_outside_the_checkout(
    events: list[dict[str, Any]], workspace: Path
) -> None:
    database = locate_state(workspace, home=workspace.parent / "membrane-home").path
    assert not (workspace / ".membrane" / "state.db").exists()
    published = _published(events)
    sessions = _rows(database, "SELECT session_id, agent, delegation_depth, status FROM sessions")
    assert sorted(sessions) == sorted(
        (e["run_id"], agent, e["data"]["depth"], "completed") for agent, e in published.items()
    )
    stored = _rows(database, "SELECT seq, session_id, kind FROM events ORDER BY seq")
    streamed = [(e["seq"], e["run_id"], e["kind"]) for e in events if e["kind"] != "result"]
    assert stored == streamed


def test_the_demo_script_prints_run_ids_that_its_store_holds(
    tmp_path: Path, isolated_home: Path
) -> None:
    """``make demo`` itself (``examples/demo.py``, text mode), run from a copy of ``examples/``
    so that its state lands in the copy."""
    examples = tmp_path / "examples"
    shutil.copytree(EXAMPLES, examples, ignore=_STATE)
    done = _run([sys.executable, str(examples / "demo.py")], cwd=tmp_path, home=isolated_home)
    assert done.returncode == 0, done.stderr
    database = locate_state(examples / "workspace", home=isolated_home).path
    sessions = _rows(
        database, "SELECT session_id, agent, parent_id, delegation_depth FROM sessions"
    )
    by_agent = {agent: (run_id, parent, depth) for run_id, agent, parent, depth in sessions}
    assert len(sessions) == len(by_agent) == 3
    lead, _, lead_depth = by_agent["lead"]
    assert (lead_depth, by_agent["scout"][1:], by_agent["auditor"][1:]) == (
        0,
        (lead, 1),
        (lead, 1),
    )
    edges = _rows(database, "SELECT parent_id, child_id, child_role FROM lineage_edges")
    assert sorted(edges) == sorted(
        [(lead, by_agent["scout"][0], "scout"), (lead, by_agent["auditor"][0], "auditor")]
    )
    for run_id, _, _ in by_agent.values():
        assert run_id in done.stdout
