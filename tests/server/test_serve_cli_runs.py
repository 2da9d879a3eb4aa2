"""``membrane run`` and ``membrane resume`` against a real ``membrane serve``: runtime-backed
when a runtime answers (the run lives in the runtime), in process with ``--headless``, and the
same output either way."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from server_support import READER_SCRIPT, START_BOUND, Running, clean_env, owner

from membrane.errors import MembraneError
from membrane.runtime.listing import RUNS_PAGE
from membrane.server import Client
from membrane.store import SessionHeader, SQLiteStore
from membrane.store.location import locate_state

pytestmark = pytest.mark.anyio

PY = sys.executable
SCRIPT = READER_SCRIPT
RUN_ID = re.compile(r"\b[0-9a-f]{8,}(?:-[0-9a-f]+)*\b")


def _cli(runtime: Running, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(runtime.home, MEMBRANE_SOCKET=str(runtime.socket), COLUMNS="200")
    return subprocess.run(
        [PY, "-m", "membrane", *args, "--project", str(runtime.project)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=START_BOUND * 2,
    )


async def _runtime_runs(runtime: Running) -> dict[str, str]:
    async with Client.connect(runtime.socket) as client:
        await client.request("initialize", {"identity": owner(runtime.home)})
        reply = await client.request("projects/add", {"root": str(runtime.project)})
        listed = await client.request("runs/list", {"projectId": reply["projectId"]})
    return {run["run_id"]: run["status"] for run in listed["runs"]}


def _script(tmp_path: Path) -> str:
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    return "scripted:script.json"  # relative: the runtime must read the command's own file


async def test_run_goes_through_a_runtime_that_answers(runtime: Running, tmp_path: Path) -> None:
    model = _script(tmp_path)
    done = _cli(runtime, tmp_path, "run", "reader", "look", "--model", model, "--json")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    result = lines[-1]
    assert result["kind"] == "result" and result["text"] == "reader is done"
    kinds = [line["kind"] for line in lines[:-1]]
    assert kinds[0] == "published" and "tool_call" in kinds and kinds[-1] == "completed"
    with anyio.fail_after(START_BOUND):
        served = await _runtime_runs(runtime)
    # The run lived in the runtime, not in the command's process.
    assert served.get(result["run_id"]) == "completed"

    resumed = _cli(
        runtime, tmp_path, "resume", result["run_id"], "once more", "--model", model, "--json"
    )
    assert resumed.returncode == 0, resumed.stderr
    again = json.loads(resumed.stdout.splitlines()[-1])
    assert again["run_id"] == result["run_id"] and again["status"] == "completed"


async def test_headless_runs_in_process_with_the_same_output(
    ops_runtime: Running, tmp_path: Path
) -> None:
    runtime = ops_runtime
    model = _script(tmp_path)
    backed = _cli(runtime, tmp_path, "run", "reader", "look", "--model", model)
    local = _cli(runtime, tmp_path, "run", "reader", "look", "--model", model, "--headless")
    assert backed.returncode == 0 and local.returncode == 0, (backed.stderr, local.stderr)
    local_id = RUN_ID.findall(local.stdout)[0]
    with anyio.fail_after(START_BOUND):
        served = await _runtime_runs(runtime)
    assert local_id not in served  # the headless run never reached the runtime
    assert "reader is done" in backed.stdout
    assert RUN_ID.sub("ID", backed.stdout) == RUN_ID.sub("ID", local.stdout)


async def test_background_leaves_the_run_to_the_runtime(runtime: Running, tmp_path: Path) -> None:
    model = _script(tmp_path)
    done = _cli(runtime, tmp_path, "run", "reader", "look", "--model", model, "--background")
    assert done.returncode == 0, done.stderr
    match = re.search(r"as run (\S+) in the background \(runtime pid (\d+)\)", done.stdout)
    assert match is not None, done.stdout
    assert int(match.group(2)) == runtime.pid
    with anyio.fail_after(START_BOUND):
        async with Client.connect(runtime.socket) as client:
            await client.request("initialize", {"identity": owner(runtime.home)})
            reply = await client.request("projects/add", {"root": str(runtime.project)})
            waited = await client.request(
                "runs/wait", {"projectId": reply["projectId"], "runId": match.group(1)}
            )
    assert waited["run"]["status"] == "completed"
    assert waited["run"]["result"]["text"] == "reader is done"


def test_background_json_is_the_started_document_of_the_headless_path(
    runtime: Running, tmp_path: Path
) -> None:
    model = _script(tmp_path)
    args = ["run", "reader", "look", "--model", model, "--background", "--json"]
    backed, local = _cli(runtime, tmp_path, *args), _cli(runtime, tmp_path, *args, "--headless")
    assert backed.returncode == local.returncode == 0, (backed.stderr, local.stderr)
    on_runtime, detached = json.loads(backed.stdout), json.loads(local.stdout)
    # One shape: the keys are the same; ``pid`` is the process running it, ``log`` its output.
    assert set(on_runtime) == set(detached) and on_runtime["kind"] == "started"
    assert (on_runtime["pid"], on_runtime["log"]) == (runtime.pid, None)
    assert detached["pid"] != runtime.pid and Path(detached["log"]).name.startswith("run-")
    with contextlib.suppress(ProcessLookupError):  # the detached run ends before the test does
        handle = os.pidfd_open(detached["pid"])
        try:
            assert select.select([handle], [], [], START_BOUND)[0]
        finally:
            os.close(handle)


def test_an_unknown_agent_is_refused_by_the_runtime_as_in_process(
    runtime: Running, tmp_path: Path
) -> None:
    model = _script(tmp_path)
    backed = _cli(runtime, tmp_path, "run", "nobody", "look", "--model", model)
    local = _cli(runtime, tmp_path, "run", "nobody", "look", "--model", model, "--headless")
    assert backed.returncode == local.returncode == 2
    assert backed.stderr.split(":")[0] == local.stderr.split(":")[0] == "unknown-agent"


async def test_runs_lists_the_same_rows_through_the_runtime_as_from_the_store(
    runtime: Running, tmp_path: Path
) -> None:
    model = _script(tmp_path)
    done = _cli(runtime, tmp_path, "run", "reader", "look", "--model", model, "--json")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout.splitlines()[-1])["run_id"]
    backed = _cli(runtime, tmp_path, "runs", "--json")
    local = _cli(runtime, tmp_path, "runs", "--json", "--headless")
    assert backed.returncode == local.returncode == 0, (backed.stderr, local.stderr)
    assert backed.stdout == local.stdout
    rows = json.loads(backed.stdout)["runs"]
    assert run_id in [row["run_id"] for row in rows]
    table = _cli(runtime, tmp_path, "runs")
    assert table.returncode == 0 and run_id in table.stdout
    assert table.stdout == _cli(runtime, tmp_path, "runs", "--headless").stdout


async def test_runs_list_pages_and_membrane_runs_follows_every_page(
    runtime: Running, tmp_path: Path
) -> None:
    state = locate_state(runtime.project, home=runtime.home).path
    store = SQLiteStore(state)
    try:
        for i in range(RUNS_PAGE + 50):
            store.create_session(
                SessionHeader(f"stored-{i:04d}", "reader", None, 0, "completed", created_at=i)
            )
    finally:
        store.close()
    with anyio.fail_after(START_BOUND):
        async with Client.connect(runtime.socket) as client:
            await client.request("initialize", {"identity": owner(runtime.home)})
            ids = {
                "projectId": (await client.request("projects/add", {"root": str(runtime.project)}))[
                    "projectId"
                ]
            }
            first = await client.request("runs/list", {**ids, "stored": True})
            assert len(first["runs"]) == RUNS_PAGE and isinstance(first["next"], str)
            rest = await client.request(
                "runs/list", {**ids, "stored": True, "after": first["next"], "limit": 1000}
            )
            assert rest["next"] is None
            listed = [row["run_id"] for row in first["runs"] + rest["runs"]]
            assert len(listed) == len(set(listed)) and {
                f"stored-{i:04d}" for i in range(150)
            } <= set(listed)
            small = await client.request("runs/list", {**ids, "stored": True, "limit": 2})
            assert [row["run_id"] for row in small["runs"]] == listed[:2]
            assert small["next"] == listed[1]
            with pytest.raises(MembraneError) as caught:
                await client.request("runs/list", {**ids, "stored": True, "after": "no-such-run"})
            assert caught.value.code == "unknown-run"
    backed = _cli(runtime, tmp_path, "runs", "--json")
    local = _cli(runtime, tmp_path, "runs", "--json", "--headless")
    assert backed.returncode == local.returncode == 0, (backed.stderr, local.stderr)
    assert backed.stdout == local.stdout
    assert [row["run_id"] for row in json.loads(backed.stdout)["runs"]] == listed
